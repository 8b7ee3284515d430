//! The page's fixed parts: its style sheet and the one script (it sorts the tables), allowed by
//! its hash in the Content-Security-Policy.

/// The script that sorts the tables (a click on a column head); the only script on the page,
/// allowed by its hash in the Content-Security-Policy. It marks the page `data-sortable` when it
/// ran, so a test can tell that the policy let it.
pub(super) const SORT_SCRIPT: &str = r#"(function () {
  document.documentElement.dataset.sortable = "on";
  for (const table of document.querySelectorAll("table.sortable")) {
    const heads = table.tHead.rows[0].cells;
    for (let i = 0; i < heads.length; i++) {
      const th = heads[i];
      const button = document.createElement("button");
      button.type = "button";
      button.textContent = th.textContent;
      th.textContent = "";
      th.appendChild(button);
      button.addEventListener("click", function () {
        const up = th.getAttribute("aria-sort") !== "ascending";
        for (const h of heads) h.removeAttribute("aria-sort");
        th.setAttribute("aria-sort", up ? "ascending" : "descending");
        const key = function (row) {
          const cell = row.cells[i];
          return cell.dataset.v === undefined ? cell.textContent : Number(cell.dataset.v);
        };
        const body = table.tBodies[0];
        const rows = Array.from(body.rows);
        rows.sort(function (a, b) {
          const x = key(a), y = key(b);
          const c = typeof x === "number" && typeof y === "number" ? x - y : String(x).localeCompare(String(y));
          return up ? c : -c;
        });
        for (const row of rows) body.appendChild(row);
      });
    }
  }
})();"#;

/// `sha256-` and the base64 SHA-256 of [`SORT_SCRIPT`] (a unit test checks it).
pub(super) const SORT_SCRIPT_HASH: &str = "sha256-hevUlbZxLIV9qEpd4jJ4T6K/AxB3I06Rf6CEO4uRLRs=";

/// The page's style sheet (the waterfall's indents are written after it, one class a depth).
pub(super) const CSS: &str = r#"
:root{--budget:#2b6cb0;--queue:#b7791f;--work:#2f855a;--late:#c53030;--call:#805ad5;--dim:#718096;--line:#e2e8f0}
body{font:14px/1.45 system-ui,"DejaVu Sans",sans-serif;margin:0 auto;max-width:1240px;padding:1em 1.5em 3em;color:#1a202c;background:#fff}
code,.num,.mono,table.data td,.axis text{font-family:ui-monospace,"DejaVu Sans Mono",monospace}
h1{font-size:1.6em;margin:.1em 0}
h2{font-size:1.25em;border-bottom:1px solid var(--line);padding-bottom:.2em;margin-top:1.6em}
h3{font-size:1.1em;margin:1.4em 0 .3em}
h4{font-size:1em;margin:.2em 0}
.trace-link{font-weight:normal;font-size:.9em;margin-left:.5em}
svg.defs{position:absolute;width:0;height:0;overflow:hidden}
.gate{border-left:6px solid;padding:.5em 1em;margin:0 0 1em}
.gate.fail{border-color:var(--late);background:#fff5f5}
.gate.pass{border-color:var(--work);background:#f0fff4}
.verdict{font-size:1.1em;margin:.3em 0}
.badge{font-weight:700}
.gate.fail .badge{color:var(--late)}
.gate.pass .badge{color:var(--work)}
dl.summary{display:grid;grid-template-columns:repeat(auto-fill,minmax(15em,1fr));gap:.5em 1.5em;margin:.5em 0}
dt{color:var(--dim);font-size:.8em;text-transform:uppercase;letter-spacing:.04em}
dd{margin:0;font-weight:600}
.warning{border-left:4px solid var(--queue);background:#fffff0;padding:.3em .8em}
.sev-error{color:var(--late)}
.sev-warning{color:#975a16}
.sev-info{color:#2c7a7b}
.late-text{color:var(--late);font-weight:700}
ul.contents{list-style:none;padding:0;display:flex;flex-wrap:wrap;gap:.3em 1.2em}
ul.legend{list-style:none;padding:0;columns:2 28em}
ul.legend li{margin:.15em 0}
ul.legend svg{vertical-align:middle}
.caps,.note,.cut,.again{color:#4a5568;font-size:.9em}
.meaning{font-style:italic}
article.chain{margin:1em 0 1.6em}
.chain-meta{margin:.1em 0 .4em;color:#4a5568}
ul.chain-findings{margin:.3em 0 .5em;padding-left:1.2em}
ul.chain-findings li{color:#1a202c}
ul.chain-findings .g{font-weight:700}
li.sev-error .g{color:var(--late)}
li.sev-warning .g{color:#975a16}
li.sev-info .g{color:#2c7a7b}
.wf{font-size:13px;border:1px solid var(--line);border-radius:4px;padding:.2em 0;overflow-x:auto}
.wf summary,.wf-axis{display:grid;grid-template-columns:1em 1.2em 24em 8.5em 600px;align-items:center;column-gap:.4em;min-height:20px;padding:0 .4em;list-style:none;cursor:pointer}
.wf-axis{cursor:default;color:var(--dim);font-size:12px}
.wf summary::-webkit-details-marker{display:none}
.wf summary::before{content:"▸";color:var(--dim)}
.wf details[open]>summary::before{content:"▾"}
.wf summary:hover,.wf details[open]>summary{background:#edf2f7}
.g{font-weight:700;text-align:center}
.lbl{overflow:hidden;text-overflow:ellipsis;white-space:nowrap}
.lbl.hop{font-weight:600}
.lbl.call{color:#553c9a}
.lbl.internal{color:#4a5568}
.num{text-align:right;white-space:nowrap}
.gap{color:var(--dim);padding:0 0 0 3.5em;font-style:italic}
.detail{margin:.2em 0 .6em 3em}
table.kv{border-collapse:collapse;font-size:12.5px}
table.kv th{text-align:left;font-weight:400;color:#4a5568;padding:.05em 1.2em .05em 0;vertical-align:top;white-space:nowrap}
table.kv td{padding:.05em 0;word-break:break-all}
table.kv tr.sub th{font-weight:700;color:#1a202c;padding-top:.4em}
svg.bar{display:block;overflow:hidden}
.axis line{stroke:#cbd5e0}
.axis text{fill:var(--dim);font-size:10px}
.m-budget{stroke:var(--budget);stroke-width:2;stroke-dasharray:6 3}
.m-deadline{fill:var(--budget)}
.m-queue{fill:url(#p-queue);stroke:var(--queue);stroke-width:.5}
.m-work{fill:var(--work)}
.m-late{fill:url(#p-late)}
.m-waiting{fill:#fed7d7;stroke:var(--late);stroke-width:.5;stroke-dasharray:2 2}
.m-call{fill:var(--call)}
.m-fwd{stroke:var(--budget);stroke-width:2;stroke-dasharray:2 3}
.m-fwd.over{stroke:var(--late);stroke-width:3}
.m-remaining{fill:#1a202c}
.m-edge{stroke:#4a5568;stroke-width:1;stroke-dasharray:1 2}
.m-internal{fill:var(--dim)}
.m-glyph{font-size:13px;font-weight:700}
.m-glyph.late{fill:var(--late)}
.m-glyph.queue{fill:var(--queue)}
.m-glyph.dim{fill:#4a5568}
table.data{border-collapse:collapse;width:100%;font-size:12.5px}
table.data th,table.data td{padding:.2em .6em;border-bottom:1px solid var(--line);text-align:right;white-space:nowrap}
table.data th:first-child,table.data td.t{text-align:left}
table.data td.t{font-family:system-ui,"DejaVu Sans",sans-serif;white-space:normal}
table.data th button{font:inherit;font-weight:700;border:0;background:none;cursor:pointer;padding:0;color:inherit}
table.data th[aria-sort=ascending] button::after{content:" ▲"}
table.data th[aria-sort=descending] button::after{content:" ▼"}
.share{letter-spacing:-1px;font-size:.8em}
tr:target{background:#fefcbf;outline:2px solid var(--queue)}
.map-frame{overflow:auto;border:1px solid var(--line);border-radius:4px;padding:.5em;max-height:80vh}
svg.map{display:block}
svg.map text{font-family:ui-monospace,"DejaVu Sans Mono",monospace;font-size:11.5px;fill:#1a202c}
.mb rect{fill:#fff;stroke:#4a5568;stroke-width:1.2}
.mb.nobody rect{fill:url(#p-nobody);stroke:var(--late);stroke-width:2}
.mb.waits rect{fill:url(#p-waits);stroke:var(--late);stroke-width:1.2;stroke-dasharray:2 2}
.mb.untraced rect{stroke-dasharray:4 3}
.mb .l0{font-weight:700}
.mb.nobody .l2{fill:var(--late);font-weight:700}
.me polyline{fill:none;stroke:#718096;stroke-width:1.2}
.me.sev-error polyline{stroke:var(--late);stroke-width:2.6}
.me.sev-warning polyline{stroke:#975a16;stroke-width:1.6}
.me.sev-info polyline{stroke:#2c7a7b}
.me text.ml{paint-order:stroke;stroke:#fff;stroke-width:3px}
.me.sev-error text.ml{fill:var(--late);font-weight:700}
a.map-edge:hover polyline,a.map-edge:focus polyline{stroke-width:3.5}
a.map-box:hover rect,a.map-box:focus rect{stroke-width:2.5}
footer{margin-top:2em;color:var(--dim);font-size:.85em}
"#;
