#!/usr/bin/env python3
"""An exec-sink plugin as an operator would write one: NDJSON records on stdin, one
acknowledgement per record on stdout. It appends what it accepts to the file named by
its first argument, rejects users called "bad", and dies once on the user "crash" to
show that the gateway restarts it and re-offers the batch. A `forget` message removes the
user's lines."""
import json
import os
import sys

out_path = sys.argv[1]
crash_marker = out_path + ".crashed"

def forget(message):
    """Removes the user's lines from the file: the request names every id the gateway held."""
    users = set(message.get("app_user_ids", []))
    records = set(message.get("record_ids", []))
    kept = []
    if os.path.exists(out_path):
        with open(out_path) as out:
            for kept_line in out:
                row = json.loads(kept_line)
                if row["user"] not in users and row["record_id"] not in records:
                    kept.append(kept_line)
        with open(out_path, "w") as out:
            out.writelines(kept)
    return {"request_id": message["request_id"], "status": "ok"}

for line in sys.stdin:
    record = json.loads(line)
    if record.get("type") == "forget":
        sys.stdout.write(json.dumps(forget(record)) + "\n")
        sys.stdout.flush()
        continue
    user = record.get("app_user_id")
    if user == "crash" and not os.path.exists(crash_marker):
        open(crash_marker, "w").close()
        sys.exit(3)
    if user == "bad":
        ack = {"record_id": record["record_id"], "status": "reject", "reason": "bad user"}
    else:
        with open(out_path, "a") as out:
            out.write(json.dumps({"record_id": record["record_id"], "user": user, "keyword": record.get("keyword")}) + "\n")
        ack = {"record_id": record["record_id"], "status": "ok"}
    sys.stdout.write(json.dumps(ack) + "\n")
    sys.stdout.flush()
