/// A vector file that does not have the expected shape.
public struct VectorFormatError: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}
