"""The policy store: each pool's launch policy, versioned, and the global default."""
