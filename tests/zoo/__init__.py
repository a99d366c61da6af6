"""Architectures no one on this project wrote (Hugging Face transformers, timm, torchvision),
small and seeded, exported with `torch.onnx.export` the way their users export them."""
