"""What-if studies (placeholder while building)."""
