/// The header of a safetensors file, read without its tensors' bytes: the format is an
/// 8-byte little-endian length N, N bytes of JSON naming every tensor (`dtype`, `shape`,
/// `data_offsets` into the data that follows) and an optional `__metadata__` object of
/// strings, then the data. https://github.com/huggingface/safetensors
///
/// A header comes from a server (or a cache folder someone filled): every number in it is
/// range-checked (P12), and it is accepted only when it describes the file exactly as the
/// format's own reader demands — offsets that tile the data from 0 to its end, each tensor's
/// bytes those of its dtype and shape — so the weights it adds up are the file's.
package struct SafetensorsHeader: Sendable, Equatable {
    /// The largest header read: the format's own limit (100 MB).
    package static let maxHeaderBytes: Int64 = 100_000_000

    /// One tensor the header describes.
    package struct Tensor: Sendable, Equatable {
        /// Its name (`model.layers.0.mlp.up_proj.weight`).
        package var name: String
        /// Its element type (`BF16`, `F16`, `U32`, …).
        package var dtype: String
        /// Its dimensions.
        package var shape: [Int64]
        /// Bytes of the tensor's data (`data_offsets[1] - data_offsets[0]`).
        package var bytes: Int64
    }

    /// Every tensor, in the header's order.
    package var tensors: [Tensor]
    /// `__metadata__`, when the header has one.
    package var metadata: [String: String]

    /// The bytes of every tensor's data: the weights.
    package var dataBytes: Int64 { tensors.reduce(0) { $0 + $1.bytes } }

    /// Bits per element of each dtype the format names (the sub-byte float formats included).
    static let dtypeBits: [String: Int64] = [
        "BOOL": 8, "U8": 8, "I8": 8, "F8_E5M2": 8, "F8_E4M3": 8, "F8_E8M0": 8,
        "I16": 16, "U16": 16, "F16": 16, "BF16": 16,
        "I32": 32, "U32": 32, "F32": 32,
        "I64": 64, "U64": 64, "F64": 64, "C64": 64,
        "F4": 4, "F6_E2M3": 6, "F6_E3M2": 6,
    ]

    /// The header length N from the file's first 8 bytes, checked against the format's
    /// limit and the file's size.
    /// - Throws: why the file cannot be a safetensors file.
    package static func headerLength(_ prefix: [UInt8], fileSize: Int64) throws(ReadProblem) -> Int64 {
        guard prefix.count == 8 else { throw ReadProblem("shorter than the 8 bytes of a safetensors length") }
        var value: UInt64 = 0
        for (n, byte) in prefix.enumerated() { value |= UInt64(byte) << (8 * UInt64(n)) }
        guard value <= UInt64(maxHeaderBytes) else {
            throw ReadProblem("its header claims \(value) bytes, over the format's limit of 100 MB")
        }
        let length = Int64(value)
        guard length >= 2 else { throw ReadProblem("its header length is \(length) bytes, too short for any JSON object") }
        guard length <= fileSize - 8 else {
            throw ReadProblem("its header claims \(length) bytes but the file has only \(fileSize) in all")
        }
        return length
    }

    /// Parses the `N` header bytes of a file of `fileSize` bytes.
    /// - Throws: why it is not a valid header.
    package static func parse(_ bytes: [UInt8], fileSize: Int64) throws(ReadProblem) -> SafetensorsHeader {
        guard Int64(bytes.count) <= maxHeaderBytes else { throw ReadProblem("its header is over the format's limit of 100 MB") }
        guard bytes.first == UInt8(ascii: "{") else { throw ReadProblem("its header is not a JSON object (it must start with '{')") }
        let root: JSONValue
        do { root = try JSONParser().parse(bytes) } catch { throw ReadProblem("its header is not JSON: \(error)") }
        guard case .object(let members) = root else { throw ReadProblem("its header is not a JSON object") }
        let dataSize = fileSize - 8 - Int64(bytes.count)
        guard dataSize >= 0 else { throw ReadProblem("its header is longer than the file") }
        var tensors: [Tensor] = []
        var spans: [(begin: Int64, end: Int64, name: String)] = []
        var metadata: [String: String] = [:]
        for (key, value) in members {
            if key == "__metadata__" {
                guard case .object(let fields) = value else { throw ReadProblem("__metadata__ is not an object of strings") }
                for (field, text) in fields {
                    guard case .string(let s) = text else { throw ReadProblem("__metadata__.\(field.prefix(64)) is not a string") }
                    metadata[field] = s
                }
                continue
            }
            let shown = String(key.prefix(120))
            guard case .object = value, case .string(let dtype)? = value["dtype"],
                  case .array(let dims)? = value["shape"], case .array(let offsets)? = value["data_offsets"] else {
                throw ReadProblem("the tensor \(shown) lacks dtype, shape or data_offsets")
            }
            guard dims.count <= 64 else { throw ReadProblem("the tensor \(shown) has \(dims.count) dimensions") }
            var shape: [Int64] = []
            var elements: Int64 = 1
            for dim in dims {
                guard case .int(let n) = dim, n >= 0 else {
                    throw ReadProblem("the tensor \(shown) has a dimension that is not a whole number of 0 or more")
                }
                let (product, overflow) = elements.multipliedReportingOverflow(by: n)
                guard !overflow else { throw ReadProblem("the tensor \(shown)'s shape multiplies beyond any file size") }
                elements = product
                shape.append(n)
            }
            guard offsets.count == 2, case .int(let begin) = offsets[0], case .int(let end) = offsets[1],
                  begin >= 0, end >= begin, end <= dataSize else {
                throw ReadProblem("the tensor \(shown)'s data_offsets are not [begin, end] within the \(dataSize) data bytes")
            }
            if let bits = dtypeBits[dtype] {
                let (totalBits, overflow) = elements.multipliedReportingOverflow(by: bits)
                guard !overflow, totalBits / 8 + (totalBits % 8 == 0 ? 0 : 1) == end - begin else {
                    throw ReadProblem("the tensor \(shown) (\(dtype), shape \(shape)) needs other than its \(end - begin) bytes")
                }
            } else {
                throw ReadProblem("the tensor \(shown) has the dtype '\(dtype.prefix(32))', which safetensors does not define")
            }
            tensors.append(Tensor(name: key, dtype: dtype, shape: shape, bytes: end - begin))
            spans.append((begin, end, shown))
        }
        // As the format's reader checks: the tensors tile the data, in offset order, from 0
        // to its very end; no gap, no overlap, nothing after.
        var cursor: Int64 = 0
        for span in spans.sorted(by: { ($0.begin, $0.end) < ($1.begin, $1.end) }) {
            guard span.begin == cursor else {
                throw ReadProblem(span.begin < cursor ? "the tensor \(span.name) overlaps another" : "there is a gap before the tensor \(span.name)")
            }
            cursor = span.end
        }
        guard cursor == dataSize else {
            throw ReadProblem("the tensors cover \(cursor) of the file's \(dataSize) data bytes")
        }
        return SafetensorsHeader(tensors: tensors, metadata: metadata)
    }
}

/// Why a file from outside (a safetensors header, a config.json, the Hub's answer) cannot
/// be used: a sentence naming what is wrong, for the message that names the file.
package struct ReadProblem: Error, Sendable, Equatable, CustomStringConvertible {
    /// What is wrong, as a sentence.
    package var reason: String
    /// A problem stated as `reason`.
    package init(_ reason: String) { self.reason = reason }
    /// `reason`.
    package var description: String { reason }
}
