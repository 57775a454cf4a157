// The living document's renderer: markdown-it (CommonMark, raw HTML off,
// so the document can never inject markup into the page) and KaTeX for
// the LaTeX between dollar signs, both vendored (vendor/) and embedded in
// the binary. Math is taken out before the Markdown pass (so `_` and `*`
// inside a formula are never read as emphasis) and put back rendered.
// The document's own two HTML shapes, section anchors
// (<a id="sec-…"></a>) and section footers (<sub>…</sub>), are restored
// after escaping; nothing else is.
"use strict";

(function (global) {
  const md = global.markdownit({ html: false, linkify: false, typographer: false });

  // $$…$$ (display) and $…$ (inline); a backslash-escaped dollar is text.
  const mathRE = /\$\$([\s\S]+?)\$\$|(^|[^\\$])\$([^\s$](?:[^$\n]*?[^\s\\$])?)\$(?!\d)/g;

  function renderMath(tex, display) {
    if (!global.katex) return (display ? "$$" : "$") + escapeHTML(tex) + (display ? "$$" : "$");
    return global.katex.renderToString(tex, { displayMode: display, throwOnError: false, output: "htmlAndMathml" });
  }

  function escapeHTML(s) {
    return s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");
  }

  function render(text) {
    const maths = [];
    const src = String(text || "").replace(/\r\n?/g, "\n").replace(mathRE, function (all, display, pre, inline) {
      if (display !== undefined) {
        maths.push(renderMath(display.trim(), true));
        return "\n\nFANOMATH" + (maths.length - 1) + "X\n\n";
      }
      maths.push(renderMath(inline, false));
      return pre + "FANOMATH" + (maths.length - 1) + "X";
    });
    let html = md.render(src);
    html = html.replace(/<p>&lt;a id=&quot;([A-Za-z0-9_-]+)&quot;&gt;&lt;\/a&gt;<\/p>/g, '<a id="$1"></a>');
    html = html.replace(/&lt;sub&gt;([\s\S]*?)&lt;\/sub&gt;/g, "<sub>$1</sub>");
    html = html.replace(/<p>FANOMATH(\d+)X<\/p>/g, function (_, i) { return maths[+i]; });
    html = html.replace(/FANOMATH(\d+)X/g, function (_, i) { return maths[+i]; });
    return html;
  }

  global.fanoMarkdown = { render: render };
})(window);
