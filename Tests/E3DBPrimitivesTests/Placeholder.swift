// Tests for E3DBPrimitives are added with that layer.
