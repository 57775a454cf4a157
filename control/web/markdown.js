// A small Markdown renderer for the living document: headings,
// paragraphs, bullet and numbered lists, block quotes, fenced code, inline
// code, bold, italic and links. Text is escaped before any markup is
// added, so the document can never inject HTML into the page.
"use strict";

(function (global) {
  function escapeHTML(s) {
    return s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");
  }

  function inline(s) {
    const codes = [];
    s = s.replace(/`([^`]+)`/g, function (_, c) { codes.push(c); return "\u0000" + (codes.length - 1) + "\u0000"; });
    s = escapeHTML(s);
    s = s.replace(/\*\*([^*]+)\*\*/g, "<strong>$1</strong>");
    s = s.replace(/(^|[^*])\*([^*\s][^*]*)\*/g, "$1<em>$2</em>");
    s = s.replace(/\[([^\]]+)\]\((https?:\/\/[^)\s]+|#[^)\s]*)\)/g, '<a href="$2" rel="noopener noreferrer">$1</a>');
    s = s.replace(/\u0000(\d+)\u0000/g, function (_, i) { return "<code>" + escapeHTML(codes[+i]) + "</code>"; });
    return s;
  }

  function render(md) {
    const lines = String(md || "").replace(/\r\n?/g, "\n").split("\n");
    const out = [];
    let para = [];
    let list = null; // {tag, items}
    function flushPara() {
      if (para.length) { out.push("<p>" + inline(para.join(" ")) + "</p>"); para = []; }
    }
    function flushList() {
      if (list) {
        out.push("<" + list.tag + ">" + list.items.map(function (i) { return "<li>" + inline(i) + "</li>"; }).join("") + "</" + list.tag + ">");
        list = null;
      }
    }
    for (let i = 0; i < lines.length; i++) {
      const line = lines[i];
      // The two HTML shapes the documenter writes, and only them: a section
      // anchor and a footer line. Anything else stays escaped text.
      const anchor = line.match(/^<a id="([A-Za-z0-9_-]+)"><\/a>$/);
      if (anchor) {
        flushPara(); flushList();
        out.push('<a id="' + anchor[1] + '"></a>');
        continue;
      }
      const sub = line.match(/^<sub>(.*)<\/sub>$/);
      if (sub) {
        flushPara(); flushList();
        out.push("<p><sub>" + inline(sub[1]) + "</sub></p>");
        continue;
      }
      const fence = line.match(/^\s*(```|~~~)(.*)$/);
      if (fence) {
        flushPara(); flushList();
        const code = [];
        i++;
        while (i < lines.length && !lines[i].trim().startsWith(fence[1])) { code.push(lines[i]); i++; }
        out.push("<pre><code>" + escapeHTML(code.join("\n")) + "</code></pre>");
        continue;
      }
      const h = line.match(/^(#{1,6})\s+(.*?)\s*#*\s*$/);
      if (h) {
        flushPara(); flushList();
        const n = h[1].length;
        out.push("<h" + n + ">" + inline(h[2]) + "</h" + n + ">");
        continue;
      }
      const ul = line.match(/^\s*[-*+]\s+(.*)$/);
      const ol = line.match(/^\s*\d+[.)]\s+(.*)$/);
      if (ul || ol) {
        flushPara();
        const tag = ul ? "ul" : "ol";
        if (list && list.tag !== tag) flushList();
        if (!list) list = { tag: tag, items: [] };
        list.items.push((ul || ol)[1]);
        continue;
      }
      if (list && /^\s{2,}\S/.test(line)) { list.items[list.items.length - 1] += " " + line.trim(); continue; }
      const q = line.match(/^>\s?(.*)$/);
      if (q) { flushPara(); flushList(); out.push("<blockquote>" + inline(q[1]) + "</blockquote>"); continue; }
      if (/^\s*([-*_])\s*\1\s*\1[\s\1]*$/.test(line)) { flushPara(); flushList(); out.push("<hr>"); continue; }
      if (line.trim() === "") { flushPara(); flushList(); continue; }
      flushList();
      para.push(line.trim());
    }
    flushPara(); flushList();
    return out.join("\n");
  }

  global.fanoMarkdown = { render: render, escapeHTML: escapeHTML };
})(window);
