// Tests for E3DBKeys are added with that layer.
