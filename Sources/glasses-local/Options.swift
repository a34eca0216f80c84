// The command line's options as typed values, each declared once, in the spirit of
// swift-argument-parser without its property wrappers: a command's options are the stored
// properties of one `OptionGroup` struct in the command's own file (found by reflection, as
// swift-argument-parser finds its wrappers), each an `Option<Value>` or a `Flag` carrying
// its name, help, how its text becomes a value and what it accepts. The parser validates
// every value against its declaration before the command runs; help, the completion
// scripts, the man page and docs/cli.md are all rendered from the same declarations
// (`OptionSpec`, the erased form). See docs/ARCHITECTURE.md, "where to add a command".

import LocalModelKit

/// How shell completion offers a value: nothing, files, folders, or a fixed set of words.
enum ValueCompletion: Sendable, Equatable {
    case none, file, directory
    case choices([String])
}

/// Why an option's text is refused.
enum Refusal: Error {
    /// The text is not what the option accepts: the message says "NAME must be ACCEPTS,
    /// got 'TEXT'".
    case notAccepted
    /// A problem of its own (a URL with credentials, an id with a capital): "NAME: PROBLEM".
    case problem(String)
}

/// How an option's text becomes its typed value, and what it accepts (for the error that
/// refuses a value, and for the reference).
struct ValueParser<Value: Sendable>: Sendable {
    /// What a value must be, as the error and the reference say it ("1…32", "llm or voice").
    var accepts: String?
    /// What shell completion offers.
    var completion: ValueCompletion = .none
    /// The value, or why the text is refused.
    var parse: @Sendable (String) throws(Refusal) -> Value
}

extension ValueParser where Value == String {
    /// Any text.
    static var text: ValueParser { ValueParser(accepts: nil) { $0 } }
    /// A path; completion offers files.
    static var file: ValueParser { ValueParser(accepts: nil, completion: .file) { $0 } }
    /// A path; completion offers folders.
    static var directory: ValueParser { ValueParser(accepts: nil, completion: .directory) { $0 } }

    /// Text that `problem` finds nothing wrong with (`CatalogRules.urlProblem`, `idProblem`).
    static func checked(accepts: String, _ problem: @escaping @Sendable (String) -> String?) -> ValueParser {
        ValueParser(accepts: accepts) { (text: String) throws(Refusal) -> String in
            if let problem = problem(text) { throw .problem(problem) }
            return text
        }
    }
}

extension ValueParser where Value == Int {
    /// A whole number (Swift's `Int` syntax) in `range`.
    static func integer(_ range: ClosedRange<Int>, accepts: String? = nil) -> ValueParser {
        ValueParser(accepts: accepts ?? "\(range.lowerBound)…\(range.upperBound)") { (text: String) throws(Refusal) -> Int in
            guard let n = Int(text), range.contains(n) else { throw .notAccepted }
            return n
        }
    }
}

extension ValueParser where Value == Int64 {
    /// Digits only (no sign, no exponent: `ExternalNumber.decimal`), in `range`.
    static func digits(_ range: ClosedRange<Int64>, accepts: String? = nil) -> ValueParser {
        ValueParser(accepts: accepts ?? "a whole number \(range.lowerBound)…\(range.upperBound)") { (text: String) throws(Refusal) -> Int64 in
            guard let n = ExternalNumber.decimal(text), range.contains(n) else { throw .notAccepted }
            return n
        }
    }
}

extension ValueParser where Value == Double {
    /// A number (Swift's `Double` syntax) that `isAccepted` takes; NaN never is.
    static func number(accepts: String, _ isAccepted: @escaping @Sendable (Double) -> Bool) -> ValueParser {
        ValueParser(accepts: accepts) { (text: String) throws(Refusal) -> Double in
            guard let x = Double(text), !x.isNaN, isAccepted(x) else { throw .notAccepted }
            return x
        }
    }

    /// A number of seconds in `range`.
    static func seconds(_ range: ClosedRange<Double>, accepts: String? = nil) -> ValueParser {
        number(accepts: accepts ?? "\(Int(range.lowerBound))…\(Int(range.upperBound)) seconds") { range.contains($0) }
    }
}

extension ValueParser where Value: RawRepresentable & CaseIterable & Sendable, Value.RawValue == String {
    /// One of an enum's raw values (`cases`, in the order messages name them); completion
    /// offers them all.
    static func choice(_ cases: [Value] = Array(Value.allCases)) -> ValueParser {
        let names = cases.map(\.rawValue)
        let accepts = names.count <= 1 ? (names.first ?? "") : names.dropLast().joined(separator: ", ") + " or " + (names.last ?? "")
        return ValueParser(accepts: accepts, completion: .choices(names)) { (text: String) throws(Refusal) -> Value in
            guard let value = Value(rawValue: text), names.contains(text) else { throw .notAccepted }
            return value
        }
    }
}

/// An option that takes a value: `--parallel 4`, `--parallel=4`.
struct Option<Value: Sendable>: Sendable {
    let name: String
    /// The value's name in usage lines and help (`N`, `DIR`).
    let valueName: String
    let help: String
    let parser: ValueParser<Value>
    /// May be given more than once, every value kept (`--include A --include B`); otherwise
    /// the last one given wins.
    let repeatable: Bool
    /// The command refuses to run without it.
    let required: Bool

    init(_ name: String, value valueName: String, help: String, _ parser: ValueParser<Value>,
         repeatable: Bool = false, required: Bool = false) {
        self.name = name
        self.valueName = valueName
        self.help = help
        self.parser = parser
        self.repeatable = repeatable
        self.required = required
    }
}

/// An option that takes no value: `--explain`.
struct Flag: Sendable {
    let name: String
    let help: String

    init(_ name: String, help: String) {
        self.name = name
        self.help = help
    }
}

/// One declared option, whatever its type: what the parser, help, completions, the man page
/// and the reference read.
struct OptionSpec: Sendable {
    var name: String
    /// Nil for a flag.
    var valueName: String?
    var help: String
    var accepts: String? = nil
    var completion: ValueCompletion = .none
    var repeatable = false
    var required = false
    /// Text → typed value (nil for a flag).
    var parse: (@Sendable (String) throws(Refusal) -> any Sendable)? = nil

    /// `--parallel N` as a usage line shows it.
    var usage: String {
        let word = name + (valueName.map { " " + $0 } ?? "")
        return required ? word : "[" + word + "]" + (repeatable ? "..." : "")
    }

    /// The message refusing `text`.
    func refusal(_ refusal: Refusal, text: String) -> String {
        switch refusal {
        case .notAccepted: return "\(name) must be \(accepts ?? "valid"), got '\(text.prefix(40))'"
        case .problem(let problem): return "\(name): \(problem)"
        }
    }
}

/// Something an `OptionGroup` declares: an option, a flag.
protocol OptionDeclaration: Sendable {
    var spec: OptionSpec { get }
}

extension Option: OptionDeclaration {
    var spec: OptionSpec {
        let parse = parser.parse
        return OptionSpec(name: name, valueName: valueName, help: help, accepts: parser.accepts, completion: parser.completion,
                          repeatable: repeatable, required: required,
                          parse: { (text: String) throws(Refusal) -> any Sendable in try parse(text) })
    }
}

extension Flag: OptionDeclaration {
    var spec: OptionSpec { OptionSpec(name: name, valueName: nil, help: help) }
}

/// A rule over several options of one command, checked before it runs.
enum OptionRule: Sendable {
    /// All or none of them.
    case allOrNone([OptionSpec])
    /// At most one of them.
    case atMostOne([OptionSpec])

    /// These options are given all together or not at all.
    static func together(_ options: any OptionDeclaration...) -> OptionRule { .allOrNone(options.map(\.spec)) }
    /// At most one of these options is given.
    static func exclusive(_ options: any OptionDeclaration...) -> OptionRule { .atMostOne(options.map(\.spec)) }
}

/// A command's options: a struct whose stored properties are `Option`s, `Flag`s and nested
/// groups (shared sets such as `TransferOptions`), in the order help lists them. Declaring
/// a property is all it takes to add an option: the parser, help, completions, the man page
/// and docs/cli.md find it here.
protocol OptionGroup: Sendable {
    init()
    /// Rules over several of the group's options (`.together(id, baseURL)`).
    var rules: [OptionRule] { get }
    /// Every option declared, in declaration order, nested groups in place (found by
    /// reflection; a group may answer without it, as `NoOptions` does).
    var specs: [OptionSpec] { get }
    /// The rules of this group and of the groups nested in it.
    var allRules: [OptionRule] { get }
}

extension OptionGroup {
    var rules: [OptionRule] { [] }

    /// By reflection over the stored properties.
    var specs: [OptionSpec] {
        Mirror(reflecting: self).children.flatMap { child -> [OptionSpec] in
            if let option = child.value as? any OptionDeclaration { return [option.spec] }
            if let group = child.value as? any OptionGroup { return group.specs }
            return []
        }
    }

    /// By reflection, for the nested groups.
    var allRules: [OptionRule] {
        rules + Mirror(reflecting: self).children.flatMap { ($0.value as? any OptionGroup)?.allRules ?? [] }
    }
}

/// A command without options of its own. It says so without reflecting: `Mirror` on even an
/// empty struct looks for a `CustomReflectable` conformance through every conformance the
/// binary holds, 0.15 ms of each `list` or `fit`.
struct NoOptions: OptionGroup {
    var specs: [OptionSpec] { [] }
    var allRules: [OptionRule] { [] }
}

/// The options every command accepts, before or after the command's name.
struct GlobalOptions: OptionGroup {
    let store = Option("--store", value: "DIR", help: "The model store folder (default: $EXTENTOS_MODELS_DIR, else $XDG_DATA_HOME/extentos/models, else ~/.local/share/extentos/models).", .directory)
    let catalog = Option("--catalog", value: "FILE", help: "Use this catalog file instead of the built-in one.", .file)
    let mirror = Option("--mirror", value: "URL", help: "Replace the origin of every source URL (local mirrors, air-gapped installs); wins over HF_ENDPOINT.",
                        .checked(accepts: "an https URL (plain http only to 127.0.0.1 or localhost)", CatalogRules.urlProblem))
    let json = Flag("--json", help: "Print one JSON document (JSON lines for downloads) instead of text.")
    let quiet = Flag("--quiet", help: "Print only errors.")
    let noProgress = Flag("--no-progress", help: "Never draw a progress bar.")
    let stallTimeout = Option("--stall-timeout", value: "S", help: "Seconds under 1 KiB/s before a transfer is retried (default 30).", .seconds(1...86_400))
    let offline = Flag("--offline", help: "Open no network connection at all (as EXTENTOS_OFFLINE=1, HF_HUB_OFFLINE=1 or TRANSFORMERS_OFFLINE=1): commands that need one fail with code offline; prefetch ends with exit 0.")

    static let shared = GlobalOptions()

    /// The stored options above, in their order, listed by hand: every command line is parsed
    /// against them, and reflecting (`specs`) would cost each run about a quarter of a
    /// millisecond of type-metadata and conformance lookups. Development builds (every test
    /// run) check the list against the declarations (`globalOptions`).
    var declared: [any OptionDeclaration] { [store, catalog, mirror, json, quiet, noProgress, stallTimeout, offline] }
}

/// The global options, erased, in help order.
let globalOptions: [OptionSpec] = {
    let specs = GlobalOptions.shared.declared.map(\.spec)
    #if DEBUG
    let reflected = GlobalOptions.shared.specs.map(\.name)
    precondition(specs.map(\.name) == reflected, "GlobalOptions.declared must list its stored options in order: \(reflected)")
    #endif
    return specs
}()
