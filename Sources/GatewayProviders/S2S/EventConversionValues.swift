import Foundation
import GatewayCore

/// The conversion value `POST /v1/events` answers for each event of an app that uses
/// SKAdNetwork, so that the backend can hand it to the app for
/// `updatePostbackConversionValue`, as Singular's S2S guide asks of a server that forwards
/// sessions and events. An app is taken to use SKAdNetwork when its event carries a
/// `skan_*` field; others are answered as before.
///
/// The value is the conversion model's (`providers.skadnetwork.conversion_model`), the one
/// `GET /v1/skadnetwork/conversion-value` answers from. With Singular's
/// `return_conversion_value`, the request first waits up to `answer_wait_ms` for Singular's
/// answer to the event's own delivery from its outbox, so the event is sent once whatever
/// the wait. The answer comes to the replica that delivered it: on PostgreSQL another
/// replica may claim the event, and the waiting one then answers the model's after the
/// bound, rather than share answers between replicas through the database.
struct EventConversionValues: IngestConversionValues {
    let model: ConversionModel?
    /// With `return_conversion_value`: where the Singular sink tells its answers.
    let singularAnswers: AnswerWaiters<VendorConversionValue>?
    let answerWait: Duration

    /// Nil when neither the model nor Singular's answers are configured.
    init?(model: ConversionModel?, s2s: S2SProvider.Options) {
        self.model = model
        let singular = s2s.forwarding.first { $0.vendor == .singular && $0.returnConversionValue }
        singularAnswers = singular.map { _ in s2s.conversionValues }
        answerWait = singular?.answerWait ?? .zero
        guard model != nil || singularAnswers != nil else { return nil }
    }

    static func state(of record: AttributionRecord) -> ConversionModel.AppState? {
        (try? RawEvent(stored: record.raw))?.skanState
    }

    /// Called before the records are stored, so that an answer Singular gives before the
    /// request starts waiting is kept.
    func expect(_ records: [AttributionRecord]) async {
        guard let singularAnswers else { return }
        for record in records where Self.state(of: record) != nil { await singularAnswers.expect(record.recordID) }
    }

    func forget(_ records: [AttributionRecord]) async {
        guard let singularAnswers else { return }
        for record in records { await singularAnswers.forget(record.recordID) }
    }

    /// One per outcome, in order: nil for an event that says nothing of SKAdNetwork.
    /// Singular's answers are waited for together, up to one `answer_wait_ms` in all.
    func values(for outcomes: [IngestOutcome], now: Date) async -> [EventConversionValue?] {
        let deadline = ContinuousClock.now + answerWait
        var values: [EventConversionValue?] = []
        for outcome in outcomes {
            guard let state = Self.state(of: outcome.record) else {
                values.append(nil)
                continue
            }
            // A duplicate is not delivered again, so Singular says nothing of it.
            if let singularAnswers, !outcome.isDuplicate, outcome.sinks.contains(Vendor.singular.sinkName),
                let answer = await singularAnswers.wait(
                    for: outcome.record.recordID, timeout: max(deadline - ContinuousClock.now, .zero))
            {
                values.append(
                    EventConversionValue(
                        fineValue: answer.fineValue, coarseValue: answer.coarseValue, lockWindow: answer.lockWindow,
                        source: "singular"))
                continue
            }
            values.append(model.map { Self.modelValue($0, state: state, now: now) })
        }
        await forget(outcomes.map(\.record))
        return values
    }

    /// The model's next values; for SKAN 4, `lock_window` when they reach the highest the
    /// model has for the window.
    static func modelValue(_ model: ConversionModel, state: ConversionModel.AppState, now: Date)
        -> EventConversionValue
    {
        let next = model.next(for: state, now: now)
        var value = EventConversionValue(
            fineValue: next.fineValue, coarseValue: next.coarseValue, window: next.window, source: "model")
        if let window = next.window {
            let changed = next.fineValue != nil || next.coarseValue != nil
            value.lockWindow =
                changed
                && model.isHighest(
                    window: window, fine: next.fineValue ?? state.fineValue,
                    coarse: next.coarseValue ?? state.coarseValue)
        }
        return value
    }
}
