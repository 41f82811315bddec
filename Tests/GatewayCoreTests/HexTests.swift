import GatewayCore
import Testing

/// Hex digits as every digest, signature and derived id in the gateway spells them.
@Suite struct HexTests {
    @Test func writesTwoLowercaseDigitsPerByteInOrder() {
        #expect(Hex.lowercase([0x00, 0x0F, 0xA5, 0xFF, 0x10]) == "000fa5ff10")
        #expect(Hex.lowercase([UInt8]()) == "")
        #expect(Hex.lowercase(0...255).count == 512)
    }
}
