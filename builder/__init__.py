"""builder: matrix -> signed, tested GPU container images -> promoted digests."""

__version__ = "0.1.0"
