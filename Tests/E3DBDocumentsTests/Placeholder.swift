// Tests for E3DBDocuments are added with that layer.
