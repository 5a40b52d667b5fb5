"""A fake `torch` for tests/coalesce/coalesce-torch.sh (torch is not installed
here): only what ccshim_torch touches, with torch's hook registration API."""
__version__ = "0.0-fake"
