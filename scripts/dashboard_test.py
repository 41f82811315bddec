"""Loads the dashboard in headless Chromium against a seeded gateway (scripts/with-test-gateway)
and checks the DOM the browser built: a table whose numbers are the JSON report's, a keyword
named like a script shown as text and never run, drill-down links that open, daily charts with
one mark per day of the period whose numbers are the JSON report's, and the country filter.

Chromium cannot send an Authorization header from its command line, so it loads the page
through a small local proxy that adds the operator key."""
import html.parser
import http.client
import http.server
import json
import os
import shutil
import subprocess
import sys
import datetime
import threading
import urllib.parse

PORT = int(os.environ["GATEWAY_PORT"])
KEY = os.environ["GATEWAY_OPERATOR_KEY"]
APP = "1234567890"
KEYWORD = "<script>alert(1)</script>"


def request(method, path, body=None, auth=False):
    c = http.client.HTTPConnection("127.0.0.1", PORT, timeout=30)
    headers = {"Content-Type": "application/json"}
    if auth:
        headers["Authorization"] = "Bearer " + KEY
    c.request(method, path, body=json.dumps(body) if body is not None else None, headers=headers)
    r = c.getresponse()
    return r.status, r.read()


def seed():
    """Three keyword installs (two paying) and one organic buyer, through the routes."""
    for user, keyword_id in [("buyer-1", "11"), ("buyer-2", "11"), ("browser", "11")]:
        details = {
            "iad-attribution": "true", "iad-org-id": "40669820", "iad-campaign-id": "542370539",
            "iad-campaign-name": "US Search", "iad-adgroup-id": "542317095", "iad-adgroup-name": "Core",
            "iad-keyword-id": keyword_id, "iad-keyword": KEYWORD, "iad-keyword-matchtype": "Exact",
            "iad-conversion-date": "2020-08-04T17:19:41Z", "iad-click-date": "2020-08-04T17:18:07Z",
        }
        status, _ = request("POST", "/v1/iad", {"app_id": APP, "app_user_id": user, "Version3.1": details})
        assert status == 202, status
    status, _ = request(
        "POST", "/v1/iad", {"app_id": APP, "app_user_id": "organic", "Version3.1": {"iad-attribution": "false"}})
    assert status == 202, status
    for user, transaction, amount in [("buyer-1", "t1", 4.99), ("buyer-2", "t2", 9.99), ("organic", "t3", 1)]:
        event = {"type": "purchase", "app_id": APP, "app_user_id": user, "revenue": amount, "currency": "USD",
                 "transaction_id": transaction, "timestamp": 1700000000}
        status, _ = request("POST", "/v1/events", event)
        assert status < 300, status


class Proxy(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        c = http.client.HTTPConnection("127.0.0.1", PORT, timeout=30)
        c.request("GET", self.path, headers={"Authorization": "Bearer " + KEY})
        r = c.getresponse()
        body = r.read()
        self.send_response(r.status)
        for name in ("Content-Type", "Content-Security-Policy"):
            if r.getheader(name):
                self.send_header(name, r.getheader(name))
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


class Table(html.parser.HTMLParser):
    """Rows of cells' text, links and script elements, as the browser's DOM holds them."""

    def __init__(self):
        super().__init__()
        self.rows, self.links, self.scripts, self.cell = [], [], 0, None
        # Each chart's marks (its `g class="mark"`), by the figure's id, as attribute dicts.
        self.charts, self.figure = {}, None

    def handle_starttag(self, tag, attrs):
        attributes = dict(attrs)
        if tag == "figure":
            self.figure = attributes.get("id")
            self.charts[self.figure] = []
        elif tag == "g" and attributes.get("class") == "mark" and self.figure:
            self.charts[self.figure].append(attributes)
        elif tag == "tr":
            self.rows.append([])
        elif tag in ("td", "th"):
            self.cell = ""
        elif tag == "a":
            self.links.append(dict(attrs).get("href", ""))
        elif tag == "script":
            self.scripts += 1

    def handle_endtag(self, tag):
        if tag == "figure":
            self.figure = None
        if tag in ("td", "th") and self.cell is not None:
            self.rows[-1].append(self.cell.strip())
            self.cell = None

    def handle_data(self, data):
        if self.cell is not None:
            self.cell += data


def browse(browser, base, path):
    """The DOM Chromium built for `path`, parsed."""
    dom = subprocess.run(
        [browser, "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom", base + path],
        capture_output=True, text=True, timeout=60, check=True).stdout
    table = Table()
    table.feed(dom)
    return table


def report(query):
    status, body = request("GET", "/v1/reports/keywords?" + urllib.parse.urlencode(query), auth=True)
    assert status == 200, status
    return json.loads(body)


def days(since, count):
    first = datetime.date.fromisoformat(since)
    return [(first + datetime.timedelta(days=n)).isoformat() for n in range(count)]


def check_charts(browser, base):
    """One mark per day of the period in each chart; installs and revenue the JSON report's."""
    failures = []
    # The purchases were made on 2023-11-14: each day's revenue is the report's for that day.
    period = days("2023-11-10", 10)
    page = browse(browser, base, "/dashboard?app_id=%s&since=2023-11-10&until=2023-11-20" % APP)
    for chart in ("chart-installs", "chart-revenue"):
        marked = [m.get("data-day") for m in page.charts.get(chart, [])]
        if marked != period:
            failures.append("%s: marks for %r, the period is %r" % (chart, marked, period))
    for mark in page.charts.get("chart-revenue", []):
        day = mark["data-day"]
        following = (datetime.date.fromisoformat(day) + datetime.timedelta(days=1)).isoformat()
        rows = report([("app_id", APP), ("since", day), ("until", following)])
        expected = sum(float(r["revenue"].get("USD", 0)) for r in rows)
        if abs(float(mark.get("data-revenue", "nan")) - expected) > 1e-9:
            failures.append("revenue on %s: the chart says %r, the JSON %r" % (day, mark.get("data-revenue"), expected))
    # The keyword installs were made on 2020-08-04 (iAd's conversion date), the organic one today.
    rows = report([("app_id", APP)])
    attributed = sum(r["installs"] for r in rows if r.get("network") == "Apple Search Ads")
    organic = sum(r["installs"] for r in rows if r.get("network") in ("organic", "unknown"))
    august = browse(browser, base, "/dashboard?app_id=%s&since=2020-08-01&until=2020-08-08" % APP)
    marks = august.charts.get("chart-installs", [])
    if [m.get("data-day") for m in marks] != days("2020-08-01", 7):
        failures.append("installs chart of 2020-08-01..07: marks %r" % [m.get("data-day") for m in marks])
    if sum(int(m.get("data-attributed", 0)) for m in marks) != attributed:
        failures.append("installs chart: attributed %r, the JSON says %d" % (marks, attributed))
    recent = browse(browser, base, "/dashboard?app_id=%s" % APP).charts.get("chart-installs", [])
    today = datetime.datetime.now(datetime.timezone.utc).date().isoformat()
    if len(recent) != 30 or recent[-1].get("data-day") != today:
        failures.append("default period: %d marks ending %r, not the 30 days to %s" % (
            len(recent), recent[-1].get("data-day") if recent else None, today))
    if sum(int(m.get("data-organic", 0)) for m in recent) != organic:
        failures.append("installs chart: organic %r, the JSON says %d" % (recent, organic))
    return failures


def check_country(browser, base):
    """The country filter: the table the browser shows is the JSON report's with it."""
    rows = report([("app_id", APP), ("country", "US")])
    page = browse(browser, base, "/dashboard?app_id=%s&country=US" % APP)
    shown = {r[0]: r[1] for r in page.rows[1:] if r}
    expected = {}
    for r in rows:
        expected[r["network"]] = expected.get(r["network"], 0) + r["installs"]
    if shown != {k: str(v) for k, v in expected.items()}:
        return ["country=US: the browser shows %r, the JSON %r" % (shown, expected)]
    return []


def main():
    browser = shutil.which("chromium-headless-shell") or shutil.which("chromium")
    if not browser:
        print("dashboard-test: no chromium-headless-shell or chromium (scripts/setup installs it)", file=sys.stderr)
        return 1
    seed()
    status, body = request("GET", "/v1/reports/keywords?app_id=" + APP, auth=True)
    assert status == 200, status
    rows = json.loads(body)
    keyword = next(r for r in rows if r.get("keyword") == KEYWORD)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Proxy)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = "http://127.0.0.1:%d" % server.server_address[1]
    failures = []

    top = browse(browser, base, "/dashboard")
    header = top.rows[0] if top.rows else []
    if header[:3] != ["Network", "Installs", "Paying users"]:
        failures.append("top view: no table with its header: %r" % header)
    network = next((r for r in top.rows if r and r[0] == "Apple Search Ads"), None)
    if network is None or network[1:3] != [str(keyword["installs"]), str(keyword["paying_users"])]:
        failures.append("top view: Apple Search Ads row %r, the JSON says %r" % (network, keyword))
    drill = [link for link in top.links if "network=Apple%20Search%20Ads" in link]
    if not drill:
        failures.append("top view: no link into Apple Search Ads: %r" % top.links)

    query = urllib.parse.urlencode(
        [("app_id", APP), ("network", "Apple Search Ads"), ("campaign_id", "542370539"), ("ad_group_id", "542317095")],
        quote_via=urllib.parse.quote)
    leaf = browse(browser, base, "/dashboard?" + query)
    line = next((r for r in leaf.rows if r and r[0] == KEYWORD), None)
    revenue = "%s" % keyword["revenue"]["USD"]
    if line is None:
        failures.append("keyword view: no row showing the keyword as text: %r" % leaf.rows)
    elif line[2:4] != [str(keyword["installs"]), str(keyword["paying_users"])] or line[-1] != revenue:
        failures.append("keyword view: %r, the JSON says %r" % (line, keyword))
    failures += check_charts(browser, base)
    failures += check_country(browser, base)
    if top.scripts or leaf.scripts:
        failures.append("a script element made it into the DOM")
    server.shutdown()
    for failure in failures:
        print("dashboard-test: " + failure, file=sys.stderr)
    if not failures:
        print("dashboard-test: the browser's table and charts match the JSON report; names shown as text")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
