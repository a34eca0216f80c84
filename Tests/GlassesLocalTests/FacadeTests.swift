import Testing
@testable import GlassesLocal
