import Testing
@testable import LocalModelKit
