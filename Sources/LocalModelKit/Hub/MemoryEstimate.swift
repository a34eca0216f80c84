/// The memory a model needs once loaded, estimated from its files before a byte of its
/// weights moves (`glasses-local add`): the weights its safetensors headers add up to, a
/// fifth more for what loading and running allocate beside them, the KV cache of a
/// 4,096-token context from its config.json, and 100 MiB for the runtime:
///
///     requiredMb = ceil((weights × 1.2 + KV) / 2^20) + 100
///     KV = 2 × num_hidden_layers × num_key_value_heads × head_dim × 4,096 tokens × 2 bytes
///
/// computed exactly in whole numbers (weights × 6/5, never a rounded double).
public struct MemoryEstimate: Sendable, Equatable {
    /// The bytes of every tensor of the safetensors files (their headers' sum).
    public var weightsBytes: Int64
    /// The KV-cache allowance; 0 when config.json does not give the shape (`kvCacheNote`).
    public var kvCacheBytes: Int64
    /// The shape it was computed from.
    public var kvCache: KVCacheShape?
    /// Why there is no KV-cache allowance, when there is none.
    public var kvCacheNote: String?
    /// The catalog's `requiredMb`: MiB, rounded up.
    public var requiredMb: Int

    /// The context the KV cache is sized for.
    public static let contextTokens: Int64 = 4096
    /// fp16/bf16 keys and values.
    public static let bytesPerValue: Int64 = 2
    /// What the runtime itself takes, beside the model.
    public static let overheadMb = 100

    /// The estimate of `weightsBytes` of weights and the KV cache of `kvCache` (none: no
    /// allowance, `kvCacheNote` says why). Throws when a number leaves 64 bits.
    package init(weightsBytes: Int64, kvCache: KVCacheShape?, kvCacheNote: String? = nil) throws(EstimateOverflow) {
        var kv: Int64 = 0
        if let kvCache {
            guard let bytes = kvCache.bytes else { throw EstimateOverflow() }
            kv = bytes
        }
        guard let required = Self.requiredMb(weightsBytes: weightsBytes, kvCacheBytes: kv) else { throw EstimateOverflow() }
        self.weightsBytes = weightsBytes
        self.kvCacheBytes = kv
        self.kvCache = kvCache
        self.kvCacheNote = kvCacheNote
        self.requiredMb = required
    }

    /// `ceil((weights × 1.2 + kv) / 2^20) + 100`, exactly: `ceil((6 × weights + 5 × kv) / (5 × 2^20))
    /// + 100`. Nil when a value is negative or the sum leaves 64 bits.
    public static func requiredMb(weightsBytes: Int64, kvCacheBytes: Int64) -> Int? {
        guard weightsBytes >= 0, kvCacheBytes >= 0 else { return nil }
        let (w6, o1) = weightsBytes.multipliedReportingOverflow(by: 6)
        let (k5, o2) = kvCacheBytes.multipliedReportingOverflow(by: 5)
        let (sum, o3) = w6.addingReportingOverflow(k5)
        guard !o1, !o2, !o3 else { return nil }
        let unit: Int64 = 5 << 20
        let mb = sum / unit + (sum % unit == 0 ? 0 : 1)
        return Int(exactly: mb + Int64(overheadMb))
    }
}

/// The estimate's numbers do not fit in 64 bits (a hostile header or config).
package struct EstimateOverflow: Error, Sendable, Equatable {}

/// The shape of a model's KV cache, from its config.json.
public struct KVCacheShape: Sendable, Equatable {
    /// `num_hidden_layers`.
    public var layers: Int64
    /// `num_key_value_heads`, else `num_attention_heads`.
    public var kvHeads: Int64
    /// `head_dim`, else `hidden_size / num_attention_heads` (rounded up).
    public var headDim: Int64
    /// Where the numbers were found: `config.json`, or its `text_config` (a model that
    /// also sees images keeps its language model's numbers there).
    public var from: String

    /// A cache of `layers` layers of `kvHeads` heads of `headDim` values each.
    public init(layers: Int64, kvHeads: Int64, headDim: Int64, from: String = "config.json") {
        self.layers = layers
        self.kvHeads = kvHeads
        self.headDim = headDim
        self.from = from
    }

    /// 2 (keys and values) × layers × KV heads × head dim × 4,096 tokens × 2 bytes; nil on
    /// overflow.
    public var bytes: Int64? {
        var total: Int64 = 2
        for factor in [layers, kvHeads, headDim, MemoryEstimate.contextTokens, MemoryEstimate.bytesPerValue] {
            let (product, overflow) = total.multipliedReportingOverflow(by: factor)
            if overflow || factor < 0 { return nil }
            total = product
        }
        return total
    }

    /// The shape config.json gives (`bytes`: its text), or nil with the reason when it gives
    /// none (no `num_hidden_layers` or no head count: a config this rule does not know).
    /// - Throws: when it is not a JSON object, or a value it gives is not a whole number in
    ///   range (P12).
    package static func read(config bytes: [UInt8]) throws(ReadProblem) -> (shape: KVCacheShape?, note: String?) {
        let root: JSONValue
        do { root = try JSONParser().parse(bytes) } catch { throw ReadProblem("not JSON: \(error)") }
        guard case .object = root else { throw ReadProblem("not a JSON object") }
        var object = root
        var from = "config.json"
        if root["num_hidden_layers"] == nil, let text = root["text_config"], case .object = text, text["num_hidden_layers"] != nil {
            object = text
            from = "config.json (text_config)"
        }
        func number(_ key: String, _ range: ClosedRange<Int64>) throws(ReadProblem) -> Int64? {
            guard let value = object[key], value != .null else { return nil }
            guard case .int(let n) = value, range.contains(n) else {
                throw ReadProblem("\(from): \(key) is not a whole number from \(range.lowerBound) to \(range.upperBound)")
            }
            return n
        }
        let layers = try number("num_hidden_layers", 1...100_000)
        let heads = try number("num_attention_heads", 1...1_000_000)
        let kvHeads = try number("num_key_value_heads", 1...1_000_000)
        let headDim = try number("head_dim", 1...1_000_000)
        let hidden = try number("hidden_size", 1...1_000_000_000)
        guard let layers else { return (nil, "\(from) gives no num_hidden_layers") }
        guard let kv = kvHeads ?? heads else {
            return (nil, "\(from) gives neither num_key_value_heads nor num_attention_heads")
        }
        let dim: Int64
        if let headDim {
            dim = headDim
        } else if let hidden, let heads {
            dim = hidden / heads + (hidden % heads == 0 ? 0 : 1)
        } else {
            return (nil, "\(from) gives neither head_dim nor hidden_size and num_attention_heads")
        }
        return (KVCacheShape(layers: layers, kvHeads: kv, headDim: dim, from: from), nil)
    }
}
