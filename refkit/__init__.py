"""refkit: reference collection and noise generation land with the refkit issue."""
