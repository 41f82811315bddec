#!/usr/bin/env python3
"""An exec-sink plugin as an operator would write one: NDJSON records on stdin, one
acknowledgement per record on stdout. It appends what it accepts to the file named by
its first argument, rejects users called "bad", and dies once on the user "crash" to
show that the gateway restarts it and re-offers the batch."""
import json
import os
import sys

out_path = sys.argv[1]
crash_marker = out_path + ".crashed"

for line in sys.stdin:
    record = json.loads(line)
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
