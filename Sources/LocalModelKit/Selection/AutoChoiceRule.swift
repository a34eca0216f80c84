/// Why the cloud must serve instead of a local model.
public enum CloudFallbackReason: String, Sendable, CaseIterable, Equatable {
    /// No auto-eligible rung fits the device's memory class.
    case belowQualityFloor
    /// The class rung exists, but memory available right now is too small for any rung.
    case insufficientMemoryNow
    /// The right rung (and every smaller usable one) is not downloaded.
    case weightsNotPresent
    /// The catalog has no auto-eligible rungs.
    case noEligibleRungs
    /// Nothing usable is installed and no eligible rung's download fits free storage.
    case insufficientStorage
    /// Asked through the SDK seam before `ExtentosLocalTier.register()` ran.
    case localTierNotRegistered
}

/// A ladder rung as the rule sees it: plain values only.
public struct LadderRung: Sendable, Equatable {
    public var id: String
    public var requiredMb: Int
    public var autoEligible: Bool
    public var isInstalled: Bool
    /// Storage that installing it still needs (remaining bytes + unpack room + margin).
    public var storageNeededBytes: Int64

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
    public var rungs: [LadderRung]
    /// physical memory × share.
    public var classBudgetMb: Int
    public var availableNowMb: Int
    public var freeStorageBytes: Int64

    public init(rungs: [LadderRung], classBudgetMb: Int, availableNowMb: Int, freeStorageBytes: Int64) {
        self.rungs = rungs
        self.classBudgetMb = classBudgetMb
        self.availableNowMb = availableNowMb
        self.freeStorageBytes = freeStorageBytes
    }
}

/// The rule's answer, with the reasoning for `auto --explain`.
public struct AutoDecision: Sendable, Equatable {
    public var modelId: String?
    public var isLocal: Bool
    public var cloudReason: CloudFallbackReason?
    public var downloadTarget: String?
    /// One line per step of the rule, in order.
    public var steps: [String]
}

/// The autoChoice rule of the DESIGN, as a pure function.
public enum AutoChoiceRule {
    public static func decide(_ input: AutoChoiceInputs) -> AutoDecision {
        var steps: [String] = []
        // Ties on requiredMb keep catalog order: the later rung wins, as the ladder lists smallest first.
        let eligible = input.rungs.enumerated()
            .filter { $0.element.autoEligible }
            .sorted { ($0.element.requiredMb, $0.offset) < ($1.element.requiredMb, $1.offset) }
            .map(\.element)

        func cloud(_ reason: CloudFallbackReason, target: String? = nil) -> AutoDecision {
            AutoDecision(modelId: nil, isLocal: false, cloudReason: reason, downloadTarget: target, steps: steps)
        }

        // 1. Eligible rungs.
        guard !eligible.isEmpty else {
            steps.append("1. no auto-eligible rungs in the catalog → cloud (noEligibleRungs)")
            return cloud(.noEligibleRungs)
        }
        steps.append("1. auto-eligible rungs: " + eligible.map { "\($0.id) (\($0.requiredMb) MiB)" }.joined(separator: ", "))

        // 2. Class rung.
        guard let classRung = eligible.last(where: { $0.requiredMb <= input.classBudgetMb }) else {
            steps.append("2. class budget \(input.classBudgetMb) MiB: no rung fits → cloud (belowQualityFloor)")
            return cloud(.belowQualityFloor)
        }
        steps.append("2. class budget \(input.classBudgetMb) MiB → class rung \(classRung.id) (\(classRung.requiredMb) MiB)")

        // 5 (computed early, reported last). Download target.
        var target: String?
        var targetNote: String
        if classRung.isInstalled {
            targetNote = "5. class rung \(classRung.id) is installed → nothing to download"
        } else if classRung.storageNeededBytes <= input.freeStorageBytes {
            target = classRung.id
            targetNote = "5. download target \(classRung.id): needs \(mb(classRung.storageNeededBytes)) MiB, \(free(input.freeStorageBytes)) MiB free"
        } else if let smaller = eligible.last(where: {
            $0.requiredMb <= classRung.requiredMb && $0.id != classRung.id && !$0.isInstalled && $0.storageNeededBytes <= input.freeStorageBytes
        }) {
            target = smaller.id
            targetNote = "5. \(classRung.id) needs \(mb(classRung.storageNeededBytes)) MiB but \(free(input.freeStorageBytes)) MiB is free → download target \(smaller.id) (\(mb(smaller.storageNeededBytes)) MiB)"
        } else {
            targetNote = "5. \(classRung.id) needs \(mb(classRung.storageNeededBytes)) MiB but \(free(input.freeStorageBytes)) MiB is free, and no smaller eligible rung fits → no download target"
        }
        let storageBlocked = !classRung.isInstalled && target == nil

        // 3. Session rung.
        guard let sessionRung = eligible.last(where: { $0.requiredMb <= classRung.requiredMb && $0.requiredMb <= input.availableNowMb }) else {
            steps.append("3. available now \(input.availableNowMb) MiB: no rung up to the class rung fits → cloud (insufficientMemoryNow)")
            steps.append(targetNote)
            return cloud(.insufficientMemoryNow, target: target)
        }
        steps.append("3. available now \(input.availableNowMb) MiB → session rung \(sessionRung.id) (\(sessionRung.requiredMb) MiB)")

        // 4. Installed?
        if sessionRung.isInstalled {
            steps.append("4. \(sessionRung.id) is installed → local \(sessionRung.id)")
            steps.append(targetNote)
            return AutoDecision(modelId: sessionRung.id, isLocal: true, cloudReason: nil, downloadTarget: target, steps: steps)
        }
        if let fallback = eligible.last(where: { $0.requiredMb < sessionRung.requiredMb && $0.isInstalled }) {
            steps.append("4. \(sessionRung.id) is not installed; largest installed smaller rung \(fallback.id) → local \(fallback.id)")
            steps.append(targetNote)
            return AutoDecision(modelId: fallback.id, isLocal: true, cloudReason: nil, downloadTarget: target, steps: steps)
        }
        let reason: CloudFallbackReason = storageBlocked ? .insufficientStorage : .weightsNotPresent
        steps.append("4. \(sessionRung.id) is not installed and no smaller rung is → cloud (\(reason.rawValue))")
        steps.append(targetNote)
        return cloud(reason, target: target)
    }

    /// Needed space rounds up, free space rounds down: never promise more than there is.
    static func mb(_ bytes: Int64) -> Int64 { (bytes + (1 << 20) - 1) >> 20 }
    static func free(_ bytes: Int64) -> Int64 { max(0, bytes) >> 20 }
}
