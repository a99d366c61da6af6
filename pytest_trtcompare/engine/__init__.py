"""The pure comparison engine: tolerances, chunked statistics, verdicts and report text.

numpy only (no pytest, no framework). `pytest_trtcompare.compare` is its public face.
"""
