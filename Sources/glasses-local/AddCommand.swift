import LocalModelKit

/// `glasses-local add REF`: a Hugging Face Hub repository added to the store's own catalog,
/// with its memory need known before a byte of its weights moves. One file over the
/// engine's `addHubModel`.
enum AddCommand {
    /// What to add, and under which id.
    struct Options: OptionGroup {
        let id = Option("--id", value: "ID", help: "The model id (default: hf-ORG-REPO, lowercased, other characters as '-').", .text)
        let name = Option("--name", value: "NAME", help: "The name 'list' shows (default: ORG/REPO).", .text)
        let include = Option("--include", value: "GLOB", help: "Also take the files this glob matches (fnmatch, whole path; may be repeated).", .text, repeatable: true)
        let exclude = Option("--exclude", value: "GLOB", help: "Leave out the files this glob matches (wins over every other rule; may be repeated).", .text, repeatable: true)
        let autoEligible = Flag("--auto-eligible", help: "Let 'auto' choose it.")
        let force = Flag("--force", help: "Replace a model added before under the same id.")
    }
    static let options = Options()

    static let command = Command(
        "add", abstract: "Add a Hugging Face Hub model to this store's catalog, its memory need estimated from its headers.",
        discussion: "REF is ORG/REPO[@REV], hf://ORG/REPO[@REV] or https://huggingface.co/ORG/REPO[/tree/REV] (REV: a branch, tag or commit; default main), read from $HF_ENDPOINT when set. The revision is pinned to its commit by the Hub's model information (the Hugging Face token goes there as to any source marked \"auth\": \"huggingface\"). Taken by default: *.safetensors, *.json, tokenizer.model, *.txt, *.tiktoken, *.jinja; never a README, .gitattributes, images, *.bin, *.pt, *.gguf or *.onnx unless --include names them. Each safetensors header is read with two range requests (no weights are downloaded); requiredMb = ceil((weights x 1.2 + KV cache of 4,096 tokens from config.json) / 1 MiB) + 100. The entry goes into STORE/user-catalog.json (id hf-ORG-REPO unless --id), beside the signed catalog, whose ids it may not take. With --offline (or HF_HUB_OFFLINE=1) the repository is read from a complete snapshot in the Hugging Face cache. Nothing is written unless it succeeds.",
        arguments: [Argument("ref", "The repository: ORG/REPO[@REV], hf://ORG/REPO[@REV] or https://huggingface.co/ORG/REPO[/tree/REV].")],
        options: options,
        exits: [ExitCase(.failure, "The repository has no safetensors weights."),
                ExitCase(.unknownModel, "The Hub does not have it."),
                ExitCase(.authRequired, "It needs a token.")],
        run: run)

    static func run(_ context: CommandContext) throws(CLIError) -> ExitCode {
        let inv = context.invocation
        // Nothing is opened (nor written) before the entry is: a failed add leaves the store as it was.
        let engine = try context.engine(openExisting: false)
        var policy = try context.setup().transferPolicy()
        if let s = inv[GlobalOptions.shared.stallTimeout] { policy.stallTimeout = s }
        let interrupt = InterruptHandler()
        let result: HubAddResult
        do {
            let reference = try HubReference.parse(inv.positional[0], endpoint: policy.hubEndpoint?.url)
            let selection = try HubFileSelection(include: inv.all(options.include), exclude: inv.all(options.exclude))
            let request = HubAddRequest(reference: reference, id: inv[options.id], displayName: inv[options.name],
                                        selection: selection, autoEligible: inv[options.autoEligible], force: inv[options.force])
            result = try engine.addHubModel(request, options: DownloadOptions(policy: policy), cancellation: interrupt.flag)
        } catch {
            var cli = CLIError(error)
            if cli.code == .usage { cli.usageOf = inv.command }
            if cli.code == .interrupted { cli.message = "add \(inv.positional[0]) interrupted; nothing was written" }
            throw cli
        }
        let m = result.model
        let estimate = result.estimate
        if context.console.json {
            context.console.printJSON(.object([
                ("modelId", .string(m.id)), ("origin", .string(m.origin.rawValue)), ("repository", .string(result.reference.repository)),
                ("requestedRevision", .string(result.reference.revision)), ("revision", .string(result.commit)),
                ("requiredMb", JSONValue(estimate.requiredMb)), ("weightsBytes", .int(estimate.weightsBytes)),
                ("kvCacheBytes", .int(estimate.kvCacheBytes)),
                ("kvCache", estimate.kvCache.map { shape -> JSONValue in
                    ["layers": .int(shape.layers), "kvHeads": .int(shape.kvHeads), "headDim": .int(shape.headDim),
                     "tokens": .int(MemoryEstimate.contextTokens), "bytesPerValue": .int(MemoryEstimate.bytesPerValue), "from": .string(shape.from)]
                } ?? .null),
                ("kvCacheNote", JSONValue(estimate.kvCacheNote)),
                ("downloadBytes", .int(m.downloadBytes)), ("autoEligible", .bool(m.autoEligible)), ("replaced", .bool(result.replaced)),
                ("safetensors", .array(result.safetensors.map(JSONValue.string))),
                ("files", .array(result.files.map {
                    ["path": .string($0.path), "size": .int($0.size), "sha256": JSONValue($0.sha256), "hash": .string($0.hashSource.rawValue)]
                })),
                ("skipped", .array(result.skipped.map { ["path": .string($0.path), "reason": .string($0.reason)] })),
                ("baseURL", .string(m.sources.first?.primaryURL ?? "")),
                ("userCatalog", .string(result.userCatalogPath)), ("readFrom", .string(result.readFrom)), ("fromCache", .bool(result.fromCache)),
            ]))
            return .ok
        }
        let c = context.console
        let pinned = result.reference.revision == result.commit ? result.commit : "\(result.commit) (\(result.reference.revision))"
        c.say("\(m.id): \(result.replaced ? "replaced by" : "added") \(result.reference.repository) at \(pinned) in \(result.userCatalogPath)"
              + (result.fromCache ? ", read offline from \(result.readFrom)" : ""))
        c.say("  memory needed: \(Format.mb(estimate.requiredMb)) = ceil((\(Format.grouped(Int(estimate.weightsBytes))) B weights × 1.2 + \(Format.grouped(Int(estimate.kvCacheBytes))) B KV cache) / 1 MiB) + \(MemoryEstimate.overheadMb)")
        c.say("  weights:       \(Format.grouped(Int(estimate.weightsBytes))) bytes, from the header\(result.safetensors.count == 1 ? "" : "s") of \(result.safetensors.count) safetensors file\(result.safetensors.count == 1 ? "" : "s") (no weights downloaded)")
        if let shape = estimate.kvCache {
            c.say("  KV cache:      \(Format.grouped(Int(estimate.kvCacheBytes))) bytes = 2 × \(shape.layers) layers × \(shape.kvHeads) KV heads × \(shape.headDim) head dim × \(Format.grouped(Int(MemoryEstimate.contextTokens))) tokens × \(MemoryEstimate.bytesPerValue) bytes (\(shape.from))")
        } else if let note = estimate.kvCacheNote {
            c.say("  KV cache:      0 bytes: \(note)")
        }
        let count = { (source: AddedFile.HashSource) in result.files.filter { $0.hashSource == source }.count }
        c.say("  download:      \(Format.bytes(m.downloadBytes)) in \(result.files.count) file\(result.files.count == 1 ? "" : "s") (\(count(.lfs)) SHA-256 from LFS, \(count(.hashed)) hashed here\(count(.sizeOnly) > 0 ? ", \(count(.sizeOnly)) size-checked only" : ""))")
        if !result.skipped.isEmpty {
            c.say("  left out:      " + result.skipped.prefix(12).map { "\($0.path) (\($0.reason))" }.joined(separator: ", ")
                  + (result.skipped.count > 12 ? ", and \(result.skipped.count - 12) more" : ""))
        }
        c.say("Next: 'glasses-local fit \(m.id)', then 'glasses-local download \(m.id)'.")
        return .ok
    }
}
