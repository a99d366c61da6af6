"""The accuracy records of a run and what is made of them, without pytest: the records and
their JUnit properties (properties.py), the accuracy summary's text (summary.py), inference
times (timings.py), and the JSON report: written, read back and merged across the shards
of one suite (document.py). The plugin writes them at session end; `trtcompare merge`
reads them."""
