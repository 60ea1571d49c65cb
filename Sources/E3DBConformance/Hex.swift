/// A vector file that does not have the expected shape.
package struct VectorFormatError: Error, CustomStringConvertible {
    package let description: String
    package init(_ description: String) { self.description = description }
}
