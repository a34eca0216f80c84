/// A ladder rung as the rule sees it: plain values only.
public struct LadderRung: Sendable, Equatable {
    /// The model's catalog id.
    public var id: String
    /// Memory the loaded model needs, in MiB: what the class and session steps compare.
    public var requiredMb: Int
    /// Whether the rule may choose it (the catalog's `autoEligible`).
    public var autoEligible: Bool
    /// Whether its install committed.
    public var isInstalled: Bool
    /// Storage that installing it still needs (remaining bytes + unpack room + margin).
    public var storageNeededBytes: Int64

    /// A rung with its facts, as ``LocalModelEngine/autoChoiceInputs()`` reads them.
    public init(id: String, requiredMb: Int, autoEligible: Bool, isInstalled: Bool, storageNeededBytes: Int64) {
        self.id = id
        self.requiredMb = requiredMb
        self.autoEligible = autoEligible
        self.isInstalled = isInstalled
        self.storageNeededBytes = storageNeededBytes
    }
}

/// The rule's inputs.
public struct AutoChoiceInputs: Sendable, Equatable {
    /// The catalog's LLMs, in catalog order (the rule takes the eligible ones, smallest first).
    public var rungs: [LadderRung]
    /// physical memory × share.
    public var classBudgetMb: Int
    /// Memory available right now, in MiB (`MemAvailable`, or its override).
    public var availableNowMb: Int
    /// Free space for the store, minus what other downloads have reserved.
    public var freeStorageBytes: Int64

    /// The inputs as plain numbers (tests give their own; the engine reads the device's).
    public init(rungs: [LadderRung], classBudgetMb: Int, availableNowMb: Int, freeStorageBytes: Int64) {
        self.rungs = rungs
        self.classBudgetMb = classBudgetMb
        self.availableNowMb = availableNowMb
        self.freeStorageBytes = freeStorageBytes
    }
}

/// Why the cloud must serve, as the rule decides it. The engine's own vocabulary: the SDK
/// facade maps it onto upstream's `CloudFallbackReason` (same names, same meanings).
public enum CloudReason: String, Sendable, CaseIterable, Equatable {
    /// No auto-eligible rung fits the device's memory class (physical memory × share).
    case belowQualityFloor
    /// The class allows a rung, but the memory available now fits none that is usable.
    case insufficientMemoryNow
    /// The rung to run, and every smaller usable one, is not installed.
    case weightsNotPresent
    /// The catalog has no auto-eligible rung.
    case noEligibleRungs
}

/// A finer reason under a `CloudReason`, where the rule knows one.
public enum CloudDetail: String, Sendable, CaseIterable, Equatable {
    /// Under `weightsNotPresent`: no download of an eligible rung fits the free storage.
    case insufficientStorage

    /// The reason it refines.
    public var reason: CloudReason {
        switch self {
        case .insufficientStorage: return .weightsNotPresent
        }
    }
}

/// The class rung's download when it does not fit the free storage (MiB: required rounded
/// up, available rounded down).
public struct StorageShortfall: Sendable, Equatable {
    /// The class rung whose download does not fit.
    public var modelId: String
    /// Storage its install still needs, in MiB, rounded up.
    public var requiredMb: Int
    /// Free storage for the store, in MiB, rounded down.
    public var availableMb: Int

    /// A shortfall of `requiredMb` against `availableMb` for `modelId`.
    public init(modelId: String, requiredMb: Int, availableMb: Int) {
        self.modelId = modelId
        self.requiredMb = requiredMb
        self.availableMb = availableMb
    }
}

/// The rule's answer, with the reasoning for `auto --explain`.
public struct AutoDecision: Sendable, Equatable {
    /// One step of the rule as it ran.
    public struct Step: Sendable, Equatable, CustomStringConvertible {
        /// The rule's step number, 1–5 (docs/ARCHITECTURE.md, "autoChoice").
        public var number: Int
        /// The rung the step settled on, if any.
        public var rungId: String?
        /// What the step found, in words (`auto --explain` prints it).
        public var text: String

        /// `"<number>. <text>"`.
        public var description: String { "\(number). \(text)" }
    }

    /// The rung to run now; nil when the cloud must serve.
    public var modelId: String?
    /// Whether a local rung serves (``modelId`` is set).
    public var isLocal: Bool { modelId != nil }
    /// Why the cloud must serve.
    public var cloudReason: CloudReason?
    /// The finer reason, when the rule knows one.
    public var cloudDetail: CloudDetail? = nil
    /// The rung worth downloading: the class rung when it is not installed and fits the
    /// storage, else the largest smaller rung that fits; nil when nothing needs fetching.
    public var downloadTarget: String?
    /// The class rung's download, when it does not fit the free storage.
    public var storageShortfall: StorageShortfall? = nil
    /// Every step that ran, in order; step 5 (the download target) always comes last.
    public var steps: [Step]

    /// The finest reason's name: the detail when there is one, else the reason (what the
    /// command's `auto` prints and its JSON `cloudReason` holds).
    public var cloudReasonName: String? { cloudDetail?.rawValue ?? cloudReason?.rawValue }
}

/// The autoChoice rule (docs/ARCHITECTURE.md, "autoChoice"), as a pure function.
public enum AutoChoiceRule {
    /// Runs the five steps over `input`: the eligible rungs smallest first, the class rung
    /// (within physical memory × share), the session rung (memory available now may only
    /// step down), local when it or a smaller rung is installed, and the download target.
    ///
    /// ```swift
    /// let decision = AutoChoiceRule.decide(try engine.autoChoiceInputs())
    /// for step in decision.steps { print(step) }
    /// ```
    /// - Parameter input: the rungs and the device's readings.
    /// - Returns: the answer with every step that ran; pure, so the same inputs give the
    ///   same answer.
    public static func decide(_ input: AutoChoiceInputs) -> AutoDecision {
        var steps: [AutoDecision.Step] = []
        func step(_ number: Int, _ rung: LadderRung?, _ text: String) {
            steps.append(AutoDecision.Step(number: number, rungId: rung?.id, text: text))
        }
        func step(_ number: Int, _ text: String) { step(number, nil, text) }
        func answer(_ modelId: String?, _ reason: CloudReason?, detail: CloudDetail? = nil, target: Target? = nil) -> AutoDecision {
            AutoDecision(modelId: modelId, cloudReason: modelId == nil ? reason : nil, cloudDetail: modelId == nil ? detail : nil,
                         downloadTarget: target?.rung?.id, storageShortfall: target?.shortfall, steps: steps)
        }
        // Smallest first; ties on requiredMb keep catalog order, so "below" is by position.
        let eligible = input.rungs.enumerated()
            .filter { $0.element.autoEligible }
            .sorted { ($0.element.requiredMb, $0.offset) < ($1.element.requiredMb, $1.offset) }
            .map(\.element)

        // 1. Eligible rungs.
        guard !eligible.isEmpty else {
            step(1, "no auto-eligible rungs in the catalog → cloud (noEligibleRungs)")
            return answer(nil, .noEligibleRungs)
        }
        step(1, "auto-eligible rungs: " + eligible.map { "\($0.id) (\($0.requiredMb) MiB)" }.joined(separator: ", "))

        // 2. Class rung: the largest within the memory class budget.
        guard let classIndex = eligible.lastIndex(where: { $0.requiredMb <= input.classBudgetMb }) else {
            step(2, "class budget \(input.classBudgetMb) MiB: no rung fits → cloud (belowQualityFloor)")
            return answer(nil, .belowQualityFloor)
        }
        let classRung = eligible[classIndex]
        step(2, classRung, "class budget \(input.classBudgetMb) MiB → class rung \(classRung.id) (\(classRung.requiredMb) MiB)")

        // 5 (worked out now, reported last): what to download.
        let target = downloadTarget(eligible[...classIndex], free: input.freeStorageBytes)

        // 3. Session rung: memory available now may only step down.
        guard let sessionIndex = eligible[...classIndex].lastIndex(where: { $0.requiredMb <= input.availableNowMb }) else {
            step(3, "available now \(input.availableNowMb) MiB: no rung up to the class rung fits → cloud (insufficientMemoryNow)")
            step(5, target.rung, target.text)
            return answer(nil, .insufficientMemoryNow, target: target)
        }
        let sessionRung = eligible[sessionIndex]
        step(3, sessionRung, "available now \(input.availableNowMb) MiB → session rung \(sessionRung.id) (\(sessionRung.requiredMb) MiB)")

        // 4. Installed? The session rung, else the largest installed rung below it.
        if sessionRung.isInstalled {
            step(4, sessionRung, "\(sessionRung.id) is installed → local \(sessionRung.id)")
            step(5, target.rung, target.text)
            return answer(sessionRung.id, nil, target: target)
        }
        if let fallback = eligible[..<sessionIndex].last(where: \.isInstalled) {
            step(4, fallback, "\(sessionRung.id) is not installed; largest installed rung below it is \(fallback.id) → local \(fallback.id)")
            step(5, target.rung, target.text)
            return answer(fallback.id, nil, target: target)
        }
        // Upstream's reason stays weightsNotPresent; that no download fits either is the detail.
        let detail: CloudDetail? = target.storageBlocked ? .insufficientStorage : nil
        step(4, "\(sessionRung.id) is not installed, nor any rung below it → cloud (weightsNotPresent"
             + (detail.map { ", detail \($0.rawValue)" } ?? "") + ")")
        step(5, target.rung, target.text)
        return answer(nil, .weightsNotPresent, detail: detail, target: target)
    }

    /// Step 5's answer: the rung to download, whether storage blocks every download, and the
    /// class rung's shortfall when its download does not fit.
    private struct Target {
        var rung: LadderRung?
        var storageBlocked = false
        var shortfall: StorageShortfall?
        var text: String
    }

    /// Step 5 over the rungs up to the class rung (the last one).
    private static func downloadTarget(_ rungs: ArraySlice<LadderRung>, free: Int64) -> Target {
        guard let classRung = rungs.last else { return Target(text: "no class rung") }
        if classRung.isInstalled {
            return Target(text: "class rung \(classRung.id) is installed → nothing to download")
        }
        let short = "\(classRung.id) needs \(mb(classRung.storageNeededBytes)) MiB of storage, \(self.free(free)) MiB is free"
        if classRung.storageNeededBytes <= free {
            return Target(rung: classRung, text: "download target \(classRung.id): needs \(mb(classRung.storageNeededBytes)) MiB of storage, \(self.free(free)) MiB is free")
        }
        let shortfall = StorageShortfall(modelId: classRung.id, requiredMb: Int(clamping: mb(classRung.storageNeededBytes)),
                                                    availableMb: Int(clamping: self.free(free)))
        // The largest smaller rung that is installed or whose download fits. An installed one
        // means nothing smaller is worth fetching.
        guard let best = rungs.dropLast().last(where: { $0.isInstalled || $0.storageNeededBytes <= free }) else {
            return Target(storageBlocked: true, shortfall: shortfall, text: short + ", and no smaller eligible rung fits → no download target")
        }
        if best.isInstalled {
            return Target(shortfall: shortfall, text: short + "; the largest smaller rung that fits, \(best.id), is installed → no download target")
        }
        return Target(rung: best, shortfall: shortfall, text: short + " → download target \(best.id) (needs \(mb(best.storageNeededBytes)) MiB)")
    }

    /// Needed space rounds up, free space rounds down: never promise more than there is.
    static func mb(_ bytes: Int64) -> Int64 { (bytes + (1 << 20) - 1) >> 20 }
    static func free(_ bytes: Int64) -> Int64 { max(0, bytes) >> 20 }
}

/// A decision of the autoChoice rule with what it was decided from
/// (``LocalModelEngine/explainAutoChoice()``).
public struct AutoChoiceExplanation: Sendable {
    /// The rule's answer.
    public var decision: AutoDecision
    /// The facts it was decided from: the rungs, the memory budgets, the free storage.
    public var inputs: AutoChoiceInputs
    /// The memory reading the budgets came from (physical, available now, its source and
    /// any override that was refused).
    public var memory: MemoryReading
}
