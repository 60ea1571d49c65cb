// Tests for E3DBCanonicalJSON are added with that layer.
