// Tests for E3DBFiles are added with that layer.
