/**
 * The dashboard's whole stylesheet: plain CSS, inlined in each page (the CSP allows inline styles and nothing else).
 */
export const STYLES = `
:root {
  --bg: #f5f6f8; --card: #ffffff; --ink: #1f2937; --muted: #6b7280; --line: #e5e7eb; --accent: #0f5fa8;
  --ok: #0f766e; --ok-bg: #ccfbf1; --warn: #9a3412; --warn-bg: #ffedd5; --bad: #b91c1c; --bad-bg: #fee2e2;
  --add: #166534; --add-bg: #dcfce7; --del: #991b1b; --del-bg: #fee2e2;
  --mono: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace;
}
* { box-sizing: border-box; }
body {
  margin: 0; background: var(--bg); color: var(--ink);
  font: 14px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif;
}
a { color: var(--accent); text-decoration: none; }
a:hover { text-decoration: underline; }
code, .mono { font-family: var(--mono); font-size: 12.5px; }
h1 { font-size: 22px; margin: 0; }
h2 { font-size: 16px; margin: 0; }
h3 { font-size: 14px; margin: 0 0 6px; }
.top { display: flex; align-items: center; gap: 24px; padding: 10px 24px; background: #111827; color: #e5e7eb; }
.top a { color: #e5e7eb; }
.brand { font-weight: 700; font-size: 15px; letter-spacing: .2px; }
.logo { color: #60a5fa; }
.top-nav { display: flex; gap: 18px; flex: 1; }
.who { display: flex; align-items: center; gap: 10px; font-size: 13px; }
main { max-width: 1180px; margin: 0 auto; padding: 20px 24px 60px; }
main.wide { max-width: 1320px; }
.page-head { display: flex; flex-wrap: wrap; align-items: center; gap: 10px 14px; margin-bottom: 14px; }
.crumbs { color: var(--muted); font-size: 13px; margin-bottom: 4px; }
.card {
  scroll-margin-top: 8px; background: var(--card); border: 1px solid var(--line); border-radius: 10px;
  padding: 16px 18px; margin: 14px 0; box-shadow: 0 1px 2px rgba(0,0,0,.03);
}
.card-head { display: flex; align-items: baseline; justify-content: space-between; gap: 12px; margin-bottom: 10px; }
.note { color: var(--muted); font-size: 12.5px; }
.stats { display: grid; grid-template-columns: repeat(auto-fit, minmax(150px, 1fr)); gap: 12px; margin: 14px 0; }
.stat { background: var(--card); border: 1px solid var(--line); border-radius: 10px; padding: 12px 14px; }
.stat .label { color: var(--muted); font-size: 12px; text-transform: uppercase; letter-spacing: .4px; }
.stat .value { font-size: 22px; font-weight: 650; margin-top: 2px; }
.stat .sub { color: var(--muted); font-size: 12px; }
.section-nav { display: flex; flex-wrap: wrap; gap: 6px; padding: 8px 0; background: var(--bg); }
.section-nav a {
  padding: 4px 10px; border-radius: 999px; background: var(--card); border: 1px solid var(--line);
  font-size: 13px;
}
table { width: 100%; border-collapse: collapse; font-size: 13px; }
th, td { text-align: left; padding: 6px 8px; border-bottom: 1px solid var(--line); vertical-align: top; }
th { color: var(--muted); font-weight: 600; font-size: 12px; text-transform: uppercase; letter-spacing: .3px; }
tbody tr:nth-child(even) { background: #fafafa; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
.pill {
  display: inline-block; padding: 1px 8px; border-radius: 999px; font-size: 12px; font-weight: 600;
  background: #e5e7eb; color: #374151; white-space: nowrap;
}
.pill.ok { background: var(--ok-bg); color: var(--ok); }
.pill.warn { background: var(--warn-bg); color: var(--warn); }
.pill.bad { background: var(--bad-bg); color: var(--bad); }
.pill.muted { background: #374151; color: #d1d5db; }
.pill.info { background: #dbeafe; color: #1e40af; }
.charts { display: grid; grid-template-columns: repeat(auto-fill, minmax(330px, 1fr)); gap: 12px; }
.chart { margin: 0; }
.chart svg { display: block; max-width: 100%; height: auto; border: 1px solid var(--line); border-radius: 8px; }
.chart figcaption { color: var(--muted); font-size: 12px; margin-top: 4px; }
.version { border-left: 3px solid var(--line); padding: 4px 0 4px 14px; margin: 14px 0; }
.version.changed { border-left-color: var(--accent); }
.version-head { display: flex; flex-wrap: wrap; gap: 8px; align-items: center; }
.rationale {
  margin: 6px 0; padding: 8px 12px; background: #f8fafc; border-radius: 6px; border: 1px solid var(--line);
  white-space: pre-wrap;
}
.diff-list { list-style: none; padding: 0; margin: 6px 0; }
.diff-list li { padding: 4px 8px; margin: 3px 0; border-radius: 6px; }
.diff-list li.added { background: var(--add-bg); }
.diff-list li.removed { background: var(--del-bg); }
.diff-list li.changed { background: #f8fafc; border: 1px solid var(--line); }
.diff-list .sign { font-family: var(--mono); font-weight: 700; margin-right: 6px; }
ins { background: var(--add-bg); color: var(--add); text-decoration: none; border-radius: 3px; padding: 0 1px; }
del { background: var(--del-bg); color: var(--del); border-radius: 3px; padding: 0 1px; }
.refused { color: var(--warn); }
details > summary { cursor: pointer; color: var(--accent); }
.flag { border: 1px solid #fed7aa; background: #fffbf5; border-radius: 8px; padding: 10px 12px; margin: 10px 0; }
.flag-head { display: flex; flex-wrap: wrap; gap: 8px; align-items: center; margin-bottom: 6px; }
.evidence { margin: 4px 0 6px; padding-left: 18px; }
.evidence li { margin: 2px 0; }
blockquote {
  margin: 6px 0; padding: 6px 10px; border-left: 3px solid #fdba74; background: #fff; white-space: pre-wrap;
  word-break: break-word; font-family: var(--mono); font-size: 12.5px;
}
.doc { border-bottom: 1px solid var(--line); padding: 10px 0; }
.doc:last-child { border-bottom: 0; }
.doc-head { display: flex; flex-wrap: wrap; gap: 8px; align-items: center; margin-bottom: 4px; }
.doc-text { white-space: pre-wrap; word-break: break-word; margin: 0; }
.more { margin-top: 10px; }
.doc details > summary { color: inherit; list-style: none; }
.doc details > summary::-webkit-details-marker { display: none; }
.show-all { color: var(--accent); white-space: nowrap; }
.doc details[open] .preview { display: none; }
form.search { display: flex; flex-wrap: wrap; gap: 8px; margin-bottom: 10px; }
input[type=text], input[type=password], input[type=search], select {
  padding: 7px 10px; border: 1px solid #d1d5db; border-radius: 6px; font: inherit; background: #fff;
}
input[type=search] { flex: 1; min-width: 220px; }
button {
  padding: 7px 14px; border: 0; border-radius: 6px; background: var(--accent); color: #fff; font: inherit;
  font-weight: 600; cursor: pointer;
}
button.link { background: none; color: #93c5fd; padding: 0; font-weight: 500; }
form.inline { display: inline; margin: 0; }
.empty { color: var(--muted); font-style: italic; }
.login { max-width: 420px; margin: 60px auto; }
.login label { display: block; font-weight: 600; margin-bottom: 6px; }
.login input { width: 100%; margin-bottom: 12px; }
.alert { padding: 8px 12px; border-radius: 6px; background: var(--bad-bg); color: var(--bad); margin-bottom: 12px; }
.muted { color: var(--muted); }
.truncate { max-width: 360px; overflow: hidden; text-overflow: ellipsis; white-space: nowrap; }
`
