import GlassesTestSupport
import Testing
@testable import LocalModelKit

/// The autoChoice rule as a table: each row is a device/store situation and the answer
/// the five steps of docs/ARCHITECTURE.md ("autoChoice") give for it.
@Suite(.networkGuard)
struct AutoChoiceRuleTests {
    static let gb: Int64 = 1 << 30

    /// The shipped ladder's shape: two non-eligible small rungs, three eligible ones.
    static func ladder(installed: Set<String> = [], need: [String: Int64] = [:]) -> [LadderRung] {
        [("local-qwen3-0.6b", 500, false), ("local-qwen25-1.5b", 1000, false), ("local-qwen3-1.7b", 1200, true),
         ("local-qwen3-4b", 2900, true), ("local-qwen3-8b", 5800, true)].map { id, mb, eligible in
            LadderRung(id: id, requiredMb: mb, autoEligible: eligible, isInstalled: installed.contains(id),
                       storageNeededBytes: installed.contains(id) ? 0 : (need[id] ?? Int64(mb) * (1 << 20)))
        }
    }

    struct Case: CustomTestStringConvertible, Sendable {
        var name: String
        var rungs: [LadderRung]
        var budget: Int
        var now: Int
        var free: Int64
        var modelId: String?
        var reason: CloudReason?
        var target: String?
        /// The finer reason beside upstream's (the rule knows only insufficientStorage).
        var detail: CloudDetail? = nil
        /// The class rung whose download does not fit the free storage, if any.
        var shortfall: String? = nil
        /// The step numbers the rule reaches, in order (4 is skipped when step 3 answers).
        var steps: [Int] = [1, 2, 3, 4, 5]
        var testDescription: String { name }
    }

    static let cases: [Case] = [
        Case(name: "empty catalog", rungs: [], budget: 8000, now: 8000, free: 100 * gb,
             modelId: nil, reason: .noEligibleRungs, target: nil, steps: [1]),
        Case(name: "only non-eligible rungs", rungs: ladder().map { var r = $0; r.autoEligible = false; return r },
             budget: 8000, now: 8000, free: 100 * gb, modelId: nil, reason: .noEligibleRungs, target: nil, steps: [1]),
        Case(name: "2 GB phone: below the quality floor", rungs: ladder(), budget: 1000, now: 1000, free: 100 * gb,
             modelId: nil, reason: .belowQualityFloor, target: nil, steps: [1, 2]),
        Case(name: "4 GB device, nothing installed", rungs: ladder(), budget: 2048, now: 3000, free: 100 * gb,
             modelId: nil, reason: .weightsNotPresent, target: "local-qwen3-1.7b"),
        Case(name: "16 GB device, nothing installed", rungs: ladder(), budget: 8000, now: 9000, free: 100 * gb,
             modelId: nil, reason: .weightsNotPresent, target: "local-qwen3-8b"),
        Case(name: "class rung installed", rungs: ladder(installed: ["local-qwen3-8b"]), budget: 8000, now: 9000, free: 100 * gb,
             modelId: "local-qwen3-8b", reason: nil, target: nil),
        Case(name: "memory now steps down to an installed 4B", rungs: ladder(installed: ["local-qwen3-8b", "local-qwen3-4b"]),
             budget: 8000, now: 3000, free: 100 * gb, modelId: "local-qwen3-4b", reason: nil, target: nil),
        Case(name: "memory now too small for any rung", rungs: ladder(installed: ["local-qwen3-8b"]), budget: 8000, now: 1000,
             free: 100 * gb, modelId: nil, reason: .insufficientMemoryNow, target: nil, steps: [1, 2, 3, 5]),
        Case(name: "session rung missing, smaller installed: local with an upgrade target",
             rungs: ladder(installed: ["local-qwen3-1.7b"]), budget: 8000, now: 9000, free: 100 * gb,
             modelId: "local-qwen3-1.7b", reason: nil, target: "local-qwen3-8b"),
        Case(name: "non-eligible installed rung is never chosen", rungs: ladder(installed: ["local-qwen3-0.6b"]),
             budget: 8000, now: 9000, free: 100 * gb, modelId: nil, reason: .weightsNotPresent, target: "local-qwen3-8b"),
        Case(name: "class rung does not fit storage: smaller target named",
             rungs: ladder(need: ["local-qwen3-8b": 5 * gb, "local-qwen3-4b": 3 * gb]), budget: 8000, now: 9000, free: 4 * gb,
             modelId: nil, reason: .weightsNotPresent, target: "local-qwen3-4b", shortfall: "local-qwen3-8b"),
        Case(name: "no eligible download fits storage: upstream's weightsNotPresent, detail insufficientStorage",
             rungs: ladder(need: ["local-qwen3-8b": 5 * gb, "local-qwen3-4b": 3 * gb, "local-qwen3-1.7b": 2 * gb]),
             budget: 8000, now: 9000, free: 1 * gb, modelId: nil, reason: .weightsNotPresent, target: nil,
             detail: .insufficientStorage, shortfall: "local-qwen3-8b"),
        Case(name: "storage short but a smaller rung installed: local, no target",
             rungs: ladder(installed: ["local-qwen3-1.7b"], need: ["local-qwen3-8b": 5 * gb, "local-qwen3-4b": 3 * gb]),
             budget: 8000, now: 9000, free: 1 * gb, modelId: "local-qwen3-1.7b", reason: nil, target: nil, shortfall: "local-qwen3-8b"),
        Case(name: "memory now too small, class rung missing: cloud, but the target is still named",
             rungs: ladder(), budget: 8000, now: 1000, free: 100 * gb,
             modelId: nil, reason: .insufficientMemoryNow, target: "local-qwen3-8b", steps: [1, 2, 3, 5]),
        Case(name: "memory now steps down past a missing 4B to an installed 1.7B, upgrade target 8B",
             rungs: ladder(installed: ["local-qwen3-1.7b"]), budget: 8000, now: 3000, free: 100 * gb,
             modelId: "local-qwen3-1.7b", reason: nil, target: "local-qwen3-8b"),
        Case(name: "memory now steps down, nothing small enough installed: weightsNotPresent even though the 8B is",
             rungs: ladder(installed: ["local-qwen3-8b"]), budget: 8000, now: 2000, free: 100 * gb,
             modelId: nil, reason: .weightsNotPresent, target: nil),
        Case(name: "a half-downloaded class rung needs only its remaining bytes",
             rungs: ladder(need: ["local-qwen3-8b": 1 * gb]), budget: 8000, now: 9000, free: 2 * gb,
             modelId: nil, reason: .weightsNotPresent, target: "local-qwen3-8b"),
        Case(name: "class rung too big for storage, a bigger-than-fitting rung installed: no smaller target",
             rungs: ladder(installed: ["local-qwen3-4b"], need: ["local-qwen3-8b": 5 * gb, "local-qwen3-1.7b": 1 * gb]),
             budget: 8000, now: 9000, free: 2 * gb, modelId: "local-qwen3-4b", reason: nil, target: nil, shortfall: "local-qwen3-8b"),
        Case(name: "storage blocks every download, and memory now is short too: memory is the reason",
             rungs: ladder(need: ["local-qwen3-8b": 5 * gb, "local-qwen3-4b": 3 * gb, "local-qwen3-1.7b": 2 * gb]),
             budget: 8000, now: 1000, free: 1 * gb, modelId: nil, reason: .insufficientMemoryNow, target: nil, shortfall: "local-qwen3-8b",
             steps: [1, 2, 3, 5]),
        Case(name: "4 GB device, storage fits only the 1.7B: target 1.7B",
             rungs: ladder(need: ["local-qwen3-4b": 3 * gb, "local-qwen3-1.7b": 1 * gb]), budget: 3000, now: 3000, free: 2 * gb,
             modelId: nil, reason: .weightsNotPresent, target: "local-qwen3-1.7b", shortfall: "local-qwen3-4b"),
        Case(name: "exact budget boundary counts as fitting", rungs: ladder(installed: ["local-qwen3-4b"]), budget: 2900, now: 2900,
             free: 100 * gb, modelId: "local-qwen3-4b", reason: nil, target: nil),
    ]

    @Test(arguments: cases)
    func decides(_ c: Case) {
        let d = AutoChoiceRule.decide(AutoChoiceInputs(rungs: c.rungs, classBudgetMb: c.budget, availableNowMb: c.now, freeStorageBytes: c.free))
        #expect(d.modelId == c.modelId)
        #expect(d.isLocal == (c.modelId != nil))
        #expect(d.cloudReason == c.reason)
        #expect(d.cloudDetail == c.detail)
        #expect(d.cloudReasonName == (c.detail?.rawValue ?? c.reason?.rawValue), "the command's cloudReason keeps the finer name")
        #expect(d.storageShortfall?.modelId == c.shortfall)
        #expect(d.downloadTarget == c.target)
        #expect(d.steps.map(\.number) == c.steps, "\(d.steps.map(\.description))")
        // A local answer is named by the step that chose it; a target by step 5.
        if let id = c.modelId { #expect(d.steps.first { $0.number == 4 }?.rungId == id) }
        #expect(d.steps.last.map { $0.number == 5 ? $0.rungId == c.target : true } == true)
    }

    /// Every reason the engine can give is reachable from the table, and the one detail
    /// the rule itself knows (localTierNotRegistered is the SDK instance's own).
    @Test func everyReasonIsCovered() {
        #expect(Set(Self.cases.compactMap(\.reason)) == Set(CloudReason.allCases))
        #expect(Set(Self.cases.compactMap(\.detail)) == [.insufficientStorage])
    }

    @Test func theShortfallIsTheClassRungsFit() throws {
        let rungs = Self.ladder(need: ["local-qwen3-8b": 5 * Self.gb + 1, "local-qwen3-4b": 3 * Self.gb, "local-qwen3-1.7b": 2 * Self.gb])
        let d = AutoChoiceRule.decide(AutoChoiceInputs(rungs: rungs, classBudgetMb: 8000, availableNowMb: 9000, freeStorageBytes: Self.gb + 5))
        let shortfall = try #require(d.storageShortfall)
        #expect(shortfall.modelId == "local-qwen3-8b")
        #expect(shortfall.requiredMb == 5 * 1024 + 1, "needed space rounds up")
        #expect(shortfall.availableMb == 1024, "free space rounds down")
        #expect(d.steps.first { $0.number == 4 }?.text.contains("cloud (weightsNotPresent, detail insufficientStorage)") == true,
                "auto --explain keeps the finer reason: \(d.steps)")
    }

    @Test func tiesOnRequiredMbKeepCatalogOrder() {
        let rungs = [LadderRung(id: "a", requiredMb: 1000, autoEligible: true, isInstalled: true, storageNeededBytes: 0),
                     LadderRung(id: "b", requiredMb: 1000, autoEligible: true, isInstalled: false, storageNeededBytes: Self.gb)]
        let d = AutoChoiceRule.decide(AutoChoiceInputs(rungs: rungs, classBudgetMb: 4000, availableNowMb: 4000, freeStorageBytes: 10 * Self.gb))
        // "b" is listed later, so it is the class rung; "a" below it serves meanwhile.
        #expect(d.modelId == "a")
        #expect(d.downloadTarget == "b")
    }

    @Test func catalogOrderDoesNotMatter() {
        let shuffled = Array(Self.ladder(installed: ["local-qwen3-4b"]).reversed())
        let d = AutoChoiceRule.decide(AutoChoiceInputs(rungs: shuffled, classBudgetMb: 8000, availableNowMb: 9000, freeStorageBytes: 100 * Self.gb))
        #expect(d.modelId == "local-qwen3-4b")
        #expect(d.downloadTarget == "local-qwen3-8b")
    }

    @Test func explainNamesEveryStepItReached() {
        let d = AutoChoiceRule.decide(AutoChoiceInputs(rungs: Self.ladder(), classBudgetMb: 2048, availableNowMb: 3000, freeStorageBytes: 100 * Self.gb))
        #expect(d.steps.map(\.description).map { $0.prefix(3) } == ["1. ", "2. ", "3. ", "4. ", "5. "])
        #expect(d.steps[1].rungId == "local-qwen3-1.7b")
        #expect(d.steps[1].text.contains("class budget 2048 MiB"))
        #expect(d.steps[2].rungId == "local-qwen3-1.7b")
        #expect(d.steps[3].text.contains("weightsNotPresent"))
        #expect(d.steps[4].rungId == "local-qwen3-1.7b")
        #expect(d.steps[4].text.contains("download target local-qwen3-1.7b"))
    }
}
