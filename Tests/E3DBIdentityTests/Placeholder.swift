// Tests for E3DBIdentity are added with that layer.
