import Crypto
import Foundation
import GatewayCore
import GRDB

/// The store's tables, as versioned migrations. Never edit a shipped migration: add one.
enum SQLiteStoreSchema {
    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("store-v1") { db in
            // The full record is kept as JSON; the columns beside it serve lookups.
            try db.execute(
                sql: """
                    CREATE TABLE records (
                        seq INTEGER PRIMARY KEY AUTOINCREMENT,
                        record_id TEXT NOT NULL UNIQUE,
                        dedupe_key TEXT NOT NULL UNIQUE,
                        provider TEXT NOT NULL,
                        app_id TEXT,
                        received_at REAL NOT NULL,
                        body TEXT NOT NULL
                    );
                    CREATE INDEX records_received ON records(received_at);
                    CREATE TABLE outbox (
                        id INTEGER PRIMARY KEY AUTOINCREMENT,
                        sink TEXT NOT NULL,
                        record_id TEXT NOT NULL REFERENCES records(record_id),
                        attempts INTEGER NOT NULL DEFAULT 0,
                        next_attempt_at REAL NOT NULL,
                        created_at REAL NOT NULL,
                        last_error TEXT,
                        UNIQUE(sink, record_id)
                    );
                    CREATE INDEX outbox_due ON outbox(sink, next_attempt_at, id);
                    CREATE TABLE dead_letters (
                        id INTEGER PRIMARY KEY AUTOINCREMENT,
                        sink TEXT NOT NULL,
                        record_id TEXT NOT NULL REFERENCES records(record_id),
                        attempts INTEGER NOT NULL,
                        error TEXT NOT NULL,
                        failed_at REAL NOT NULL,
                        UNIQUE(sink, record_id)
                    );
                    """)
        }
        migrator.registerMigration("store-v2-pending") { db in
            // Accepted payloads whose record waits for an outside answer (AdServices
            // tokens). The retry schedule lives here so that it survives a restart.
            try db.execute(
                sql: """
                    CREATE TABLE pending (
                        record_id TEXT PRIMARY KEY,
                        provider TEXT NOT NULL,
                        dedupe_key TEXT NOT NULL UNIQUE,
                        app_id TEXT,
                        received_at REAL NOT NULL,
                        state BLOB NOT NULL,
                        attempts INTEGER NOT NULL DEFAULT 0,
                        next_attempt_at REAL NOT NULL,
                        last_error TEXT
                    );
                    CREATE INDEX pending_due ON pending(provider, next_attempt_at);
                    """)
        }
        migrator.registerMigration("store-v3-sdk-users") { db in
            // The ASA Attribution SDK names users by integer and sends StoreKit original
            // transaction ids; a transaction belongs to one user.
            try db.execute(
                sql: """
                    CREATE TABLE sdk_users (
                        id INTEGER PRIMARY KEY AUTOINCREMENT,
                        created_at REAL NOT NULL,
                        attribution_record_id TEXT
                    );
                    CREATE TABLE sdk_transactions (
                        transaction_id TEXT PRIMARY KEY,
                        user_id INTEGER NOT NULL REFERENCES sdk_users(id),
                        created_at REAL NOT NULL
                    );
                    CREATE INDEX sdk_transactions_user ON sdk_transactions(user_id);
                    """)
        }
        migrator.registerMigration("store-v4-outbox-lanes") { db in
            // The device of each outbox row, for destinations that deliver in device order.
            try db.execute(
                sql: """
                    ALTER TABLE outbox ADD COLUMN lane TEXT;
                    CREATE INDEX outbox_lane ON outbox(sink, lane, id);
                    """)
        }
        migrator.registerMigration("store-v5-outbox-lanes-backfill") { db in
            // Rows queued before lanes existed get their device too, so that a sink
            // switched to in-device order keeps it for them.
            try db.execute(
                sql: """
                    UPDATE outbox SET lane = (
                        SELECT json_extract(r.body, '$.app_id') || '|' || COALESCE(json_extract(r.body, '$.idfv'),
                            'user:' || json_extract(r.body, '$.app_user_id'), json_extract(r.body, '$.idfa'))
                        FROM records r WHERE r.record_id = outbox.record_id AND json_valid(r.body))
                    WHERE lane IS NULL
                    """)
        }
        migrator.registerMigration("store-v6-outbox-position") { db in
            // A late version of a record gets a new row (see replaceRecords) that must keep
            // the old row's place among rows queued at the same moment; NULL: its own id.
            try db.execute(sql: "ALTER TABLE outbox ADD COLUMN position INTEGER")
        }
        migrator.registerMigration("store-v7-pending-claims") { db in
            // Until when a claim hides the work (NULL: not claimed), so that a server
            // starting after a crash can hand back what the dead one held at once, rather
            // than after the lease, without undoing a retry's own schedule.
            try db.execute(sql: "ALTER TABLE pending ADD COLUMN claimed_until REAL")
        }
        migrator.registerMigration("data:raw-without-unconsented-ids") { db in
            try db.execute(sql: SQLiteStoreSchema.rawWithoutUnconsentedIDs)
        }
        migrator.registerMigration("data:s2s-purchases-keyed-by-transaction") { db in
            try SQLiteStoreSchema.keyPurchasesByTransaction(db)
        }
        // Also rekeys the rows of its first version,
        // `data:s2s-events-keyed-by-canonical-content`, whose key rounded times to
        // milliseconds: a store that ran that one runs this one too, so that a resend of
        // such an event is still a duplicate.
        migrator.registerMigration("data:s2s-events-keyed-by-content") { db in
            try SQLiteStoreSchema.keyEventsByCanonicalContent(db)
        }
        migrator.registerMigration("store-v8-outbox-sending") { db in
            // When a sink whose destination counts every copy (a vendor) began sending the
            // row's record (NULL: not being sent). A row found so marked after a crash may
            // have been counted: it is not sent again unasked.
            try db.execute(sql: "ALTER TABLE outbox ADD COLUMN sending_since REAL")
        }
        migrator.registerMigration("store-v9-quarantine-size") { db in
            // The size of each quarantined record (NULL for the others), so that the oldest
            // can be dropped past the provider's cap without reading every body; and the
            // sinks' rows by record, so that dropping one need not scan them (SQLite checks
            // each deleted record against its foreign keys).
            try db.execute(
                sql: """
                    ALTER TABLE records ADD COLUMN quarantined_bytes INTEGER;
                    UPDATE records SET quarantined_bytes = length(CAST(body AS BLOB))
                    WHERE instr(body, '"signature":"') > 0 AND json_valid(body)
                        AND json_extract(body, '$.signature') <> 'verified';
                    CREATE INDEX records_quarantined ON records(provider, seq, quarantined_bytes)
                        WHERE quarantined_bytes IS NOT NULL;
                    CREATE INDEX outbox_record ON outbox(record_id);
                    CREATE INDEX dead_letters_record ON dead_letters(record_id);
                    """)
        }
        migrator.registerMigration("store-v10-sdk-users-by-attribution") { db in
            // Retention keeps the record an ASA SDK user's attribution points to, and asks
            // for each old record whether one does.
            try db.execute(sql: "CREATE INDEX sdk_users_attribution ON sdk_users(attribution_record_id)")
        }
        migrator.registerMigration("store-v11-forget") { db in
            // Forget requests: the audit row stays; `identifiers` (the user's ids found) only
            // until every sink has answered, each answer in `forget_answers`.
            try db.execute(
                sql: """
                    CREATE TABLE forget_requests (
                        request_id TEXT PRIMARY KEY,
                        app_id TEXT NOT NULL,
                        user_sha256 TEXT NOT NULL,
                        requested_at REAL NOT NULL,
                        completed_at REAL,
                        records_forgotten INTEGER NOT NULL,
                        sinks TEXT NOT NULL,
                        identifiers TEXT
                    );
                    CREATE TABLE forget_answers (
                        request_id TEXT NOT NULL REFERENCES forget_requests(request_id),
                        sink TEXT NOT NULL,
                        state TEXT NOT NULL,
                        reason TEXT,
                        answered_at REAL NOT NULL,
                        PRIMARY KEY (request_id, sink)
                    );
                    """)
        }
        migrator.registerMigration("store-v12-compact-raw") { db in
            // A record's raw payload, compressed (`CompactRaw`), apart from its body; NULL
            // when the body still holds it (written earlier) or it was removed. The body
            // stays the record's fields as JSON text.
            try db.execute(sql: "ALTER TABLE records ADD COLUMN raw BLOB")
        }
        migrator.registerMigration("store-v13-report-index") { db in
            // The keyword report's facts, kept by the report indexer (SQLiteStore+ReportIndex)
            // from the records the triggers queue: every record written, changed or deleted
            // is queued in the same transaction, so none is missed whoever wrote it. The
            // queue's ids say which entries a report waits for: they grow while entries wait
            // (an id is reused only once the queue has emptied, all earlier entries indexed).
            try db.execute(
                sql: """
                    CREATE TABLE report_queue (id INTEGER PRIMARY KEY, seq INTEGER NOT NULL);
                    CREATE TRIGGER report_queue_insert AFTER INSERT ON records
                        BEGIN INSERT INTO report_queue (seq) VALUES (NEW.seq); END;
                    CREATE TRIGGER report_queue_update AFTER UPDATE OF body ON records
                        BEGIN INSERT INTO report_queue (seq) VALUES (NEW.seq); END;
                    CREATE TRIGGER report_queue_delete AFTER DELETE ON records
                        BEGIN INSERT INTO report_queue (seq) VALUES (OLD.seq); END;
                    INSERT INTO report_queue (seq) SELECT seq FROM records ORDER BY seq;
                    CREATE TABLE report_nodes (node INTEGER PRIMARY KEY, group_id INTEGER NOT NULL);
                    CREATE INDEX report_nodes_group ON report_nodes (group_id);
                    CREATE TABLE report_members (seq INTEGER PRIMARY KEY, group_id INTEGER NOT NULL);
                    CREATE INDEX report_members_group ON report_members (group_id);
                    CREATE TABLE report_attributions (
                        id INTEGER PRIMARY KEY, key TEXT NOT NULL UNIQUE, app_id TEXT, network TEXT,
                        campaign_id INTEGER, campaign TEXT, ad_group_id INTEGER, ad_group TEXT,
                        keyword_id INTEGER, keyword TEXT, match_type TEXT
                    );
                    CREATE TABLE report_people (
                        group_id INTEGER NOT NULL, app_id TEXT NOT NULL, line_id INTEGER NOT NULL,
                        attribution_id INTEGER NOT NULL, installed_at REAL NOT NULL, record_id TEXT NOT NULL,
                        attributed INTEGER NOT NULL, country INTEGER NOT NULL, is_test INTEGER NOT NULL
                    );
                    CREATE INDEX report_people_group ON report_people (group_id);
                    -- A line's names come from its newest install: the rare installs of one
                    -- time are sorted by record_id as they are read.
                    CREATE INDEX report_people_names ON report_people (line_id, attribution_id, installed_at);
                    CREATE INDEX report_people_sums
                        ON report_people (app_id, is_test, line_id, country, attributed, installed_at);
                    CREATE INDEX report_people_days ON report_people (app_id, is_test, installed_at, attributed);
                    CREATE TABLE report_purchases (
                        group_id INTEGER NOT NULL, app_id TEXT NOT NULL, buyer INTEGER NOT NULL,
                        purchased_at REAL NOT NULL, line_id INTEGER NOT NULL, country INTEGER NOT NULL,
                        converts INTEGER NOT NULL, refunded INTEGER NOT NULL, revenue TEXT, currency TEXT
                    );
                    CREATE INDEX report_purchases_group ON report_purchases (group_id);
                    CREATE INDEX report_purchases_sums ON report_purchases (
                        app_id, refunded, line_id, country, purchased_at, buyer, converts, currency, revenue);
                    CREATE INDEX report_purchases_days
                        ON report_purchases (app_id, refunded, purchased_at, currency, revenue);
                    CREATE TABLE report_postbacks (
                        seq INTEGER PRIMARY KEY, app_id TEXT NOT NULL, received_at REAL NOT NULL, source TEXT NOT NULL,
                        won INTEGER NOT NULL, has_value INTEGER NOT NULL, fine INTEGER, coarse TEXT,
                        events TEXT NOT NULL
                    );
                    """)
        }
        migrator.registerMigration("store-v14-raw-beside-body") { _ in
            // No table changes: `raw` values written from now on are packed against their
            // body (``CompactRaw``'s format 2), which a release before it cannot read. Named,
            // so that such a release refuses the store rather than dead-letter each record.
        }
        return migrator
    }

    /// Migrations named so change rows only, never tables: a release that does not know one
    /// still reads the store (``standing(_:)`` does not count it as a newer release's).
    static let dataOnlyPrefix = "data:"

    /// The S2S provider keys a purchase by its transaction before its `event_id`, so that a
    /// resend under another `event_id` is not a second purchase. A purchase stored under the
    /// earlier rule, as `s2s:APP:id:EVENT`, gets the key it would get now, so that its
    /// resend after the upgrade is still a duplicate and not forwarded to the vendors again.
    /// (The key's rule is the provider's: this only brings stored rows to it.) Where two
    /// records of one transaction exist (the earlier rule made them), the first keeps the
    /// new key.
    static func keyPurchasesByTransaction(_ db: Database) throws {
        // In pages, so that a store of millions of purchases is not read into memory at once.
        var after: Int64 = 0
        while true {
            let rows = try Row.fetchAll(
                db,
                sql: """
                    SELECT seq, json_extract(body, '$.app_id') AS app, json_extract(body, '$.transaction_ref') AS tx
                    FROM records WHERE seq > ? AND provider = 's2s' AND dedupe_key LIKE 's2s:%:id:%'
                        AND json_valid(body) AND json_extract(body, '$.kind') = 'purchase'
                    ORDER BY seq LIMIT 5000
                    """,
                arguments: [after])
            guard let last = rows.last else { return }
            after = last["seq"]
            for row in rows {
                guard let app = row["app"] as String?, let transaction = row["tx"] as String? else { continue }
                try db.execute(
                    sql: "UPDATE OR IGNORE records SET dedupe_key = ? WHERE seq = ?",
                    arguments: [DedupeKey.make("s2s", app, "purchase", transaction), row["seq"] as Int64])
            }
        }
    }

    /// Under an earlier rule an S2S event with neither a transaction nor an `event_id` was
    /// keyed by a hash of its text as sent (`s2s:APP:content:HASH`), so that a resend writing
    /// its time or IDFV another way was a second event. Those with a `timestamp` (the others
    /// are never deduped) get the key the provider gives now (`EventContent.dedupeKey`, which
    /// both use), and so do the `event:` keys of this migration's first version, which
    /// rounded times to milliseconds. Where two records were one event spelt two ways, the
    /// first keeps the new key. Read in pages, so that a store of millions of events is not
    /// read into memory at once.
    static func keyEventsByCanonicalContent(_ db: Database) throws {
        var after: Int64 = 0
        while true {
            let rows = try Row.fetchAll(
                db,
                sql: """
                    SELECT seq, json_extract(body, '$.app_id') AS app, json_extract(body, '$.raw') AS raw
                    FROM records WHERE seq > ? AND provider = 's2s'
                        AND (dedupe_key LIKE 's2s:%:content:%' OR dedupe_key LIKE 's2s:%:event:%')
                        AND json_valid(body) AND json_type(body, '$.raw.timestamp') NOT IN ('null')
                    ORDER BY seq LIMIT 5000
                    """,
                arguments: [after])
            guard let last = rows.last else { return }
            after = last["seq"]
            for row in rows {
                guard let app = row["app"] as String?, let text = row["raw"] as String?,
                    case .object(let raw)? = try? JSONValue.parse(Data(text.utf8))
                else { continue }
                let key = EventContent.dedupeKey(appID: app, stored: raw, received: nil) { content in
                    Hex.lowercase(SHA256.hash(data: Data(content.utf8)))
                }
                try db.execute(
                    sql: "UPDATE OR IGNORE records SET dedupe_key = ? WHERE seq = ?",
                    arguments: [key, row["seq"] as Int64])
            }
        }
    }

    /// Records stored by earlier versions kept in `raw` what the record itself may not: an
    /// iAd payload's IDFA sent without ATT consent, and an imported AdServices answer's IDFA
    /// and token (the app's fields kept inside Apple's body). Current versions keep neither;
    /// this removes them from the rows stored earlier.
    static let rawWithoutUnconsentedIDs = """
        UPDATE records SET body = json_remove(body, '$.raw.idfa')
        WHERE provider = 'iad' AND json_valid(body) AND json_extract(body, '$.idfa') IS NULL
            AND json_type(body, '$.raw.idfa') IS NOT NULL;
        UPDATE records SET body = json_remove(body, '$.raw.apple.body.token')
        WHERE dedupe_key LIKE 'adservices:answer:%' AND json_valid(body)
            AND json_type(body, '$.raw.apple.body.token') IS NOT NULL;
        UPDATE records SET body = json_remove(body, '$.raw.apple.body.idfa')
        WHERE dedupe_key LIKE 'adservices:answer:%' AND json_valid(body) AND json_extract(body, '$.idfa') IS NULL
            AND json_type(body, '$.raw.apple.body.idfa') IS NOT NULL;
        """

    /// How a store's tables stand against this binary's migrations.
    enum Standing: Equatable {
        case current
        /// Migrations this binary has that the store has not had yet.
        case behind(missing: [String])
        /// Migrations a newer binary applied that this one does not know.
        case ahead(unknown: [String])
    }

    static func standing(_ db: Database) throws -> Standing {
        let migrator = self.migrator
        let applied = try migrator.appliedIdentifiers(db)
        let known = migrator.migrations
        let unknown = applied.subtracting(known).filter { !$0.hasPrefix(dataOnlyPrefix) }.sorted()
        if !unknown.isEmpty { return .ahead(unknown: unknown) }
        let missing = known.filter { !applied.contains($0) }
        return missing.isEmpty ? .current : .behind(missing: missing)
    }
}
