"""The task models trained to produce curves; each builder takes the input shape and a size configuration."""
