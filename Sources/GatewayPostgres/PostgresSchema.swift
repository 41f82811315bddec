import Logging
import PostgresNIO

/// The store's tables on PostgreSQL, as versioned migrations applied once under an
/// advisory lock: replicas starting together wait for the one that upgrades. Never edit a
/// shipped migration: add one.
enum PostgresSchema {
    /// Any 64-bit number no other application of the database uses for its own lock.
    static let advisoryLock: Int64 = 0x4154_5452_4757_0001

    static let migrations: [(id: String, sql: [String])] = [
        (
            "store-v1",
            [
                // Bodies are kept as the JSON text the gateway wrote (jsonb would reorder
                // keys and reformat numbers); `gateway_json` reads one in a query and
                // answers NULL for a body that is not JSON instead of failing the statement.
                """
                CREATE FUNCTION gateway_json(body text) RETURNS jsonb LANGUAGE plpgsql IMMUTABLE AS $$
                BEGIN
                    RETURN body::jsonb;
                EXCEPTION WHEN others THEN
                    RETURN NULL;
                END $$
                """,
                // AttributionRecord.deliveryLane, from a stored body.
                """
                CREATE FUNCTION gateway_lane(body text) RETURNS text LANGUAGE sql IMMUTABLE AS $$
                    SELECT (j ->> 'app_id') || '|' || COALESCE(j ->> 'idfv', 'user:' || (j ->> 'app_user_id'), j ->> 'idfa')
                    FROM (SELECT gateway_json(body) AS j) b
                $$
                """,
                """
                CREATE TABLE records (
                    seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
                    record_id text NOT NULL UNIQUE,
                    dedupe_key text NOT NULL UNIQUE,
                    provider text NOT NULL,
                    app_id text,
                    received_at double precision NOT NULL,
                    body text NOT NULL
                )
                """,
                "CREATE INDEX records_received ON records (received_at, seq)",
                """
                CREATE TABLE outbox (
                    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
                    sink text NOT NULL,
                    record_id text NOT NULL REFERENCES records (record_id),
                    attempts bigint NOT NULL DEFAULT 0,
                    next_attempt_at double precision NOT NULL,
                    created_at double precision NOT NULL,
                    last_error text,
                    lane text,
                    position bigint,
                    sending_since double precision,
                    UNIQUE (sink, record_id)
                )
                """,
                "CREATE INDEX outbox_due ON outbox (sink, next_attempt_at, id)",
                "CREATE INDEX outbox_lane ON outbox (sink, lane, id)",
                """
                CREATE TABLE dead_letters (
                    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
                    sink text NOT NULL,
                    record_id text NOT NULL REFERENCES records (record_id),
                    attempts bigint NOT NULL,
                    error text NOT NULL,
                    failed_at double precision NOT NULL,
                    UNIQUE (sink, record_id)
                )
                """,
                """
                CREATE TABLE pending (
                    record_id text PRIMARY KEY,
                    provider text NOT NULL,
                    dedupe_key text NOT NULL UNIQUE,
                    app_id text,
                    received_at double precision NOT NULL,
                    state bytea NOT NULL,
                    attempts bigint NOT NULL DEFAULT 0,
                    next_attempt_at double precision NOT NULL,
                    last_error text,
                    claimed_until double precision
                )
                """,
                "CREATE INDEX pending_due ON pending (provider, next_attempt_at)",
                """
                CREATE TABLE sdk_users (
                    id bigint PRIMARY KEY,
                    created_at double precision NOT NULL,
                    attribution_record_id text
                )
                """,
                """
                CREATE TABLE sdk_transactions (
                    transaction_id text PRIMARY KEY,
                    user_id bigint NOT NULL REFERENCES sdk_users (id),
                    created_at double precision NOT NULL
                )
                """,
                "CREATE INDEX sdk_transactions_user ON sdk_transactions (user_id)",
            ]
        ),
        (
            "store-v2-quarantine-size",
            [
                // The size of each quarantined record (NULL for the others), so that the
                // oldest can be dropped past the provider's cap without reading every body;
                // and the sinks' rows by record, which each dropped record's foreign keys
                // are checked against.
                "ALTER TABLE records ADD COLUMN quarantined_bytes bigint",
                """
                UPDATE records SET quarantined_bytes = octet_length(body)
                WHERE strpos(body, '"signature":"') > 0 AND gateway_json(body) ->> 'signature' <> 'verified'
                """,
                """
                CREATE INDEX records_quarantined ON records (provider, seq, quarantined_bytes)
                    WHERE quarantined_bytes IS NOT NULL
                """,
                "CREATE INDEX outbox_record ON outbox (record_id)",
                "CREATE INDEX dead_letters_record ON dead_letters (record_id)",
            ]
        ),
        (
            "store-v3-sdk-users-by-attribution",
            [
                // Retention keeps the record an ASA SDK user's attribution points to, and
                // asks for each old record whether one does.
                "CREATE INDEX sdk_users_attribution ON sdk_users (attribution_record_id)"
            ]
        ),
        (
            "store-v4-forget",
            [
                // Forget requests: the audit row stays; `identifiers` (the user's ids found)
                // only until every sink has answered, each answer in `forget_answers`.
                """
                CREATE TABLE forget_requests (
                    request_id text PRIMARY KEY,
                    app_id text NOT NULL,
                    user_sha256 text NOT NULL,
                    requested_at double precision NOT NULL,
                    completed_at double precision,
                    records_forgotten bigint NOT NULL,
                    sinks text[] NOT NULL,
                    identifiers text
                )
                """,
                """
                CREATE TABLE forget_answers (
                    request_id text NOT NULL REFERENCES forget_requests (request_id),
                    sink text NOT NULL,
                    state text NOT NULL,
                    reason text,
                    answered_at double precision NOT NULL,
                    PRIMARY KEY (request_id, sink)
                )
                """,
            ]
        ),
        (
            "store-v5-compact-raw",
            [
                // A record's raw payload, compressed (`CompactRaw`), apart from its body; NULL
                // when the body still holds it (written earlier) or it was removed. The body
                // stays the record's fields as JSON text.
                "ALTER TABLE records ADD COLUMN raw bytea"
            ]
        ),
        (
            "store-v6-report-index",
            [
                // The keyword report's facts, kept by the report indexer (PostgresStore+ReportIndex)
                // from the records the triggers queue: every record written, changed or deleted
                // is queued in the same transaction, so none is missed whoever wrote it. A record
                // changed while a batch reads it is queued again under a new id.
                "CREATE TABLE report_queue (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, seq bigint NOT NULL)",
                """
                CREATE FUNCTION report_queue_changed() RETURNS trigger LANGUAGE plpgsql AS $$
                BEGIN
                    INSERT INTO report_queue (seq) SELECT seq FROM changed ORDER BY seq;
                    RETURN NULL;
                END $$
                """,
                """
                CREATE TRIGGER report_queue_insert AFTER INSERT ON records REFERENCING NEW TABLE AS changed
                    FOR EACH STATEMENT EXECUTE FUNCTION report_queue_changed()
                """,
                """
                CREATE TRIGGER report_queue_update AFTER UPDATE ON records REFERENCING NEW TABLE AS changed
                    FOR EACH STATEMENT EXECUTE FUNCTION report_queue_changed()
                """,
                """
                CREATE TRIGGER report_queue_delete AFTER DELETE ON records REFERENCING OLD TABLE AS changed
                    FOR EACH STATEMENT EXECUTE FUNCTION report_queue_changed()
                """,
                "INSERT INTO report_queue (seq) SELECT seq FROM records ORDER BY seq",
                "CREATE SEQUENCE report_groups",
                "CREATE TABLE report_nodes (node bigint PRIMARY KEY, group_id bigint NOT NULL)",
                "CREATE INDEX report_nodes_group ON report_nodes (group_id)",
                "CREATE TABLE report_members (seq bigint PRIMARY KEY, group_id bigint NOT NULL)",
                "CREATE INDEX report_members_group ON report_members (group_id)",
                """
                CREATE TABLE report_attributions (
                    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, key text NOT NULL UNIQUE, app_id text,
                    network text, campaign_id bigint, campaign text, ad_group_id bigint, ad_group text,
                    keyword_id bigint, keyword text, match_type text
                )
                """,
                // `record_id` orders byte by byte, as the report's ties between installs do,
                // the database's collation.
                """
                CREATE TABLE report_people (
                    group_id bigint NOT NULL, app_id text NOT NULL, line_id bigint NOT NULL,
                    attribution_id bigint NOT NULL, installed_at double precision NOT NULL,
                    record_id text COLLATE "C" NOT NULL, attributed boolean NOT NULL, country integer NOT NULL,
                    is_test boolean NOT NULL
                )
                """,
                "CREATE INDEX report_people_group ON report_people (group_id)",
                // A line's names come from its newest install: the rare installs of one time
                // are sorted by `record_id` as they are read, so the index need not hold it.
                "CREATE INDEX report_people_names ON report_people (line_id, attribution_id, installed_at)",
                """
                CREATE INDEX report_people_sums
                    ON report_people (app_id, is_test, line_id, country, attributed, installed_at)
                """,
                "CREATE INDEX report_people_days ON report_people (app_id, is_test, installed_at, attributed)",
                """
                CREATE TABLE report_purchases (
                    group_id bigint NOT NULL, app_id text NOT NULL, buyer bigint NOT NULL,
                    purchased_at double precision NOT NULL, line_id bigint NOT NULL, country integer NOT NULL,
                    converts boolean NOT NULL, refunded boolean NOT NULL, revenue text, currency text
                )
                """,
                "CREATE INDEX report_purchases_group ON report_purchases (group_id)",
                """
                CREATE INDEX report_purchases_sums ON report_purchases (
                    app_id, refunded, line_id, country, purchased_at, buyer, converts, currency, revenue)
                """,
                "CREATE INDEX report_purchases_days ON report_purchases (app_id, refunded, purchased_at, currency, revenue)",
                """
                CREATE TABLE report_postbacks (
                    seq bigint PRIMARY KEY, app_id text NOT NULL, received_at double precision NOT NULL,
                    source text NOT NULL, won boolean NOT NULL, has_value boolean NOT NULL, fine integer, coarse text,
                    events text NOT NULL
                )
                """,
            ]
        ),
        (
            "store-v7-lane-from-column",
            [
                // A stored body leaves out the fields records keeps in columns, app_id among them.
                """
                CREATE FUNCTION gateway_lane(app_id text, body text) RETURNS text LANGUAGE sql IMMUTABLE AS $$
                    SELECT app_id || '|' || COALESCE(j ->> 'idfv', 'user:' || (j ->> 'app_user_id'), j ->> 'idfa')
                    FROM (SELECT gateway_json(body) AS j) b
                $$
                """
            ]
        ),
        (
            "store-v8-dedupe-key-digest",
            [
                // Dedupe by the key's MD5 as a uuid, not its text: the index takes 16 bytes a key
                // instead of about 50 (random keys, so about 40 bytes a record against 90). MD5
                // is an index hash here, not a seal: two keys collide only when someone crafted
                // both, and then only their own records dedupe, as the key's digest says. Lookups
                // by key go through the digest and compare the text too.
                "ALTER TABLE records DROP CONSTRAINT records_dedupe_key_key",
                "CREATE UNIQUE INDEX records_dedupe_digest ON records ((md5(dedupe_key)::uuid))",
            ]
        ),
        (
            "store-v9-raw-beside-body",
            [
                // No table changes: `raw` values written from now on are packed against their
                // body (`CompactRaw`'s format 2), which a release before it cannot read. Named,
                // so that such a release refuses the database rather than dead-letter each record.
                "SELECT 1"
            ]
        ),
        (
            "store-v10-coded-body-keys",
            [
                // Bodies are written under one-character keys (`StoredKey`, which these
                // functions spell out: a code never changes). The lane reads them, and
                // `gateway_record` gives a body under its fields' names, for SQL written by hand.
                """
                CREATE OR REPLACE FUNCTION gateway_lane(app_id text, body text) RETURNS text LANGUAGE sql IMMUTABLE AS $$
                    SELECT app_id || '|' || COALESCE(j ->> 'F', 'user:' || (j ->> 'E'), j ->> 'G')
                    FROM (SELECT gateway_json(body) AS j) b
                $$
                """,
                """
                CREATE FUNCTION gateway_record(body text) RETURNS jsonb LANGUAGE sql IMMUTABLE AS $$
                    SELECT jsonb_object_agg(COALESCE(k.names ->> e.key, e.key), e.value)
                    FROM jsonb_each(gateway_json(body)) e, (SELECT '\(codeNames)'::jsonb AS names) k
                $$
                """,
            ]
        ),
        (
            "store-v11-received-at-in-column",
            [
                // Bodies written from now on leave `received_at` to its column, which a release
                // before cannot read. `gateway_record` takes the whole row, so that it gives the
                // fields kept in columns too.
                "DROP FUNCTION gateway_record(text)",
                gatewayRecord,
            ]
        ),
        (
            "store-v12-people-by-seq",
            [
                // A person's install by its `seq`, not its id (37 bytes), the fixed-width
                // columns first so that none is padded. The index is made again from the
                // records: the next report indexes every record, as a first one does.
                "TRUNCATE report_queue, report_nodes, report_members, report_people, report_purchases, report_postbacks",
                "DROP TABLE report_people",
                """
                CREATE TABLE report_people (
                    group_id bigint NOT NULL, line_id bigint NOT NULL, attribution_id bigint NOT NULL,
                    installed_at double precision NOT NULL, install_seq bigint NOT NULL, country integer NOT NULL,
                    attributed boolean NOT NULL, is_test boolean NOT NULL, app_id text NOT NULL
                )
                """,
                "CREATE INDEX report_people_group ON report_people (group_id)",
                "CREATE INDEX report_people_names ON report_people (line_id, attribution_id, installed_at)",
                """
                CREATE INDEX report_people_sums
                    ON report_people (app_id, is_test, line_id, country, attributed, installed_at)
                """,
                "CREATE INDEX report_people_days ON report_people (app_id, is_test, installed_at, attributed)",
                "INSERT INTO report_queue (seq) SELECT seq FROM records ORDER BY seq",
            ]
        ),
        (
            "store-v13-usual-values-left-out",
            [
                // Bodies written from now on leave out `is_test: false` and `resolution:
                // resolved` (`EncodedRecord.codedDefaults`), which a release before cannot
                // read; `gateway_record` gives them back.
                gatewayRecord
            ]
        ),
        (
            "store-v14-report-apps-by-number",
            [
                // The report's people and purchases name their app by a number (`report_apps`),
                // four bytes where the app's id took about a dozen in each row and in the two
                // indexes of each that lead with it. The index is made again from the records.
                "TRUNCATE report_queue, report_nodes, report_members, report_people, report_purchases, report_postbacks",
                "CREATE TABLE report_apps (id integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY, app_id text NOT NULL UNIQUE)",
                "DROP TABLE report_people",
                """
                CREATE TABLE report_people (
                    group_id bigint NOT NULL, line_id bigint NOT NULL, attribution_id bigint NOT NULL,
                    installed_at double precision NOT NULL, install_seq bigint NOT NULL, country integer NOT NULL,
                    app integer NOT NULL, attributed boolean NOT NULL, is_test boolean NOT NULL
                )
                """,
                "CREATE INDEX report_people_group ON report_people (group_id)",
                "CREATE INDEX report_people_names ON report_people (line_id, attribution_id, installed_at)",
                "CREATE INDEX report_people_sums ON report_people (app, is_test, line_id, country, attributed, installed_at)",
                "CREATE INDEX report_people_days ON report_people (app, is_test, installed_at, attributed)",
                "DROP TABLE report_purchases",
                """
                CREATE TABLE report_purchases (
                    group_id bigint NOT NULL, buyer bigint NOT NULL, purchased_at double precision NOT NULL,
                    line_id bigint NOT NULL, app integer NOT NULL, country integer NOT NULL, converts boolean NOT NULL,
                    refunded boolean NOT NULL, revenue text, currency text
                )
                """,
                "CREATE INDEX report_purchases_group ON report_purchases (group_id)",
                """
                CREATE INDEX report_purchases_sums ON report_purchases (
                    app, refunded, line_id, country, purchased_at, buyer, converts, currency, revenue)
                """,
                "CREATE INDEX report_purchases_days ON report_purchases (app, refunded, purchased_at, currency, revenue)",
                "INSERT INTO report_queue (seq) SELECT seq FROM records ORDER BY seq",
            ]
        ),
        (
            "store-v15-record-id-as-uuid",
            [
                // A record is found by its id through the id as a uuid (16 bytes, and record
                // ids grow with time, so the index packs full pages) instead of a unique index
                // on its 36 characters: about 31 bytes a record against 59. An id that is not
                // a lowercase UUID (a test's, say) goes by its MD5, as a dedupe key does
                // (`store-v8`). `gateway_records(ids)` is the lookup, which compares the text
                // too; both are plain SQL that the planner inlines, so the index serves it. A
                // foreign key needs a unique column: the outbox and dead letters now name
                // their record by its `seq`.
                """
                CREATE FUNCTION gateway_uuid(id text) RETURNS uuid LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
                    SELECT CASE WHEN id ~ '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$'
                        THEN id::uuid ELSE md5(id)::uuid END
                $$
                """,
                """
                CREATE FUNCTION gateway_records(ids text[]) RETURNS SETOF records LANGUAGE sql STABLE AS $$
                    SELECT * FROM records
                    WHERE gateway_uuid(record_id) = ANY(ARRAY(SELECT gateway_uuid(i) FROM unnest(ids) AS i))
                        AND record_id = ANY(ids)
                $$
                """,
                "ALTER TABLE outbox ADD COLUMN record_seq bigint",
                "UPDATE outbox o SET record_seq = r.seq FROM records r WHERE r.record_id = o.record_id",
                "ALTER TABLE outbox DROP COLUMN record_id",
                "ALTER TABLE outbox ALTER COLUMN record_seq SET NOT NULL",
                "ALTER TABLE outbox ADD UNIQUE (sink, record_seq), ADD FOREIGN KEY (record_seq) REFERENCES records (seq)",
                "CREATE INDEX outbox_record ON outbox (record_seq)",
                "ALTER TABLE dead_letters ADD COLUMN record_seq bigint",
                "UPDATE dead_letters d SET record_seq = r.seq FROM records r WHERE r.record_id = d.record_id",
                "ALTER TABLE dead_letters DROP COLUMN record_id",
                "ALTER TABLE dead_letters ALTER COLUMN record_seq SET NOT NULL",
                """
                ALTER TABLE dead_letters ADD UNIQUE (sink, record_seq),
                    ADD FOREIGN KEY (record_seq) REFERENCES records (seq)
                """,
                "CREATE INDEX dead_letters_record ON dead_letters (record_seq)",
                "ALTER TABLE records DROP CONSTRAINT records_record_id_key",
                "CREATE UNIQUE INDEX records_record_id ON records (gateway_uuid(record_id))",
            ]
        ),
    ]

    /// `gateway_record(r)`: a row of `records` as the record's JSON under its fields' names,
    /// for SQL written by hand. The columns give the fields kept apart, a body's own value
    /// of one (a body written before) is the one read, as the record's reader does, and a
    /// value a body leaves out (`EncodedRecord.codedDefaults`) is given back.
    static let gatewayRecord = """
        CREATE OR REPLACE FUNCTION gateway_record(r records) RETURNS jsonb LANGUAGE sql STABLE AS $$
            SELECT jsonb_build_object('is_test', false, 'resolution', 'resolved') || jsonb_strip_nulls(jsonb_build_object(
                'record_id', r.record_id, 'dedupe_key', r.dedupe_key, 'provider', r.provider,
                'app_id', r.app_id, 'received_at', (
                    SELECT to_char(to_timestamp(m.ms / 1000) AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS')
                        || CASE WHEN m.ms % 1000 = 0 THEN '' ELSE '.' || lpad((m.ms % 1000)::text, 3, '0') END
                        || 'Z'
                    FROM (SELECT floor(r.received_at * 1000 + 0.5)::int8 AS ms) m)
            )) || COALESCE((
                SELECT jsonb_object_agg(COALESCE(k.names ->> e.key, e.key), e.value)
                FROM jsonb_each(gateway_json(r.body)) e, (SELECT '\(codeNames)'::jsonb AS names) k
            ), '{}')
        $$
        """

    /// Every ``StoredKey`` code with its field's name, as a JSON object, for `gateway_record`
    /// (`PostgresCodedBodyTests` checks it against the table).
    static let codeNames = """
        {
            "A":"record_id","B":"received_at","C":"provider","D":"app_id","E":"app_user_id","F":"idfv",
            "G":"idfa","H":"att_status","I":"attributed","J":"kind","K":"resolution","L":"is_test",
            "M":"duplicate_of","N":"network","O":"org_id","P":"org_name","Q":"campaign_id",
            "R":"campaign_name","S":"ad_group_id","T":"ad_group_name","U":"keyword_id","V":"keyword",
            "W":"keyword_match_type","X":"ad_id","Y":"creative_set_id","Z":"creative_set_name",
            "a":"country_or_region","b":"conversion_type","c":"claim_type","d":"supply_placement",
            "e":"click_date","f":"impression_date","g":"conversion_date","h":"purchase_date",
            "i":"skan_version","j":"ad_network_id","k":"transaction_id","l":"source_app_id",
            "m":"source_identifier","n":"source_domain","o":"fine_value","p":"coarse_value",
            "q":"postback_sequence_index","r":"did_win","s":"fidelity_type","t":"redownload",
            "u":"signature","v":"events","w":"revenue_min","x":"revenue_max","y":"event_name","z":"revenue",
            "0":"currency","1":"transaction_ref","2":"vendor_ids","3":"raw","4":"dedupe_key",
            "5":"enriched_at"
        }
        """

    /// Applies the migrations the database lacks. Replicas starting at once queue on the
    /// advisory lock, and each finds the work done by the first. A database that a newer
    /// binary upgraded is refused: this one would run on tables whose meaning it does not know.
    static func migrate(_ client: PostgresClient, logger: Logger) async throws {
        try await client.withConnection { connection in
            try await withAdvisoryLock(advisoryLock, on: connection, logger: logger) {
                try await apply(on: connection, logger: logger)
            }
        }
    }

    private static func apply(on connection: PostgresConnection, logger: Logger) async throws {
        _ = try await connection.query(
            """
            CREATE TABLE IF NOT EXISTS gateway_migrations (
                id text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())
            """, logger: logger)
        var applied: Set<String> = []
        for try await id in try await connection.query("SELECT id FROM gateway_migrations", logger: logger)
            .decode(String.self)
        {
            applied.insert(id)
        }
        let unknown = applied.subtracting(migrations.map(\.id)).sorted()
        guard unknown.isEmpty else {
            throw StoreNotReady(
                reason: "a newer attribution-gateway upgraded this database (\(unknown.joined(separator: ", "))); "
                    + "run that version or a later one")
        }
        for migration in migrations where !applied.contains(migration.id) {
            logger.info("upgrading the database's tables", metadata: ["migration": "\(migration.id)"])
            try await connection.withTransaction(logger: logger) { connection in
                for statement in migration.sql {
                    _ = try await connection.query(PostgresQuery(unsafeSQL: statement), logger: logger)
                }
                _ = try await connection.query(
                    "INSERT INTO gateway_migrations (id) VALUES (\(migration.id))", logger: logger)
            }
        }
    }
}

/// The database cannot serve this binary.
public struct StoreNotReady: Error, CustomStringConvertible {
    public let reason: String
    public var description: String { reason }

    public init(reason: String) {
        self.reason = reason
    }
}
