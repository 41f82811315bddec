/// A provider of signed postbacks: its records carry a signature verdict, and those that
/// did not verify are kept in quarantine within a cap (`quarantine_max_mb`), so that a
/// flood of forgeries on an open route cannot fill the disk.
public protocol PostbackProvider: AttributionProvider {
    /// The most the quarantine may hold, in bytes of stored records.
    var quarantineMaxBytes: Int { get }
}
