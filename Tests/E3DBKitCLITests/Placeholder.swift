// Tests for E3DBKitCLI are added with that layer.
