"""What dynspec knows: sglang's behaviour per release, features, findings. All of it is data
under configs/; this package loads and validates it once and answers questions about it."""
