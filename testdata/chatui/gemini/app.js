// The fake Gemini: conversations at /app/<id>, a Quill-like editor inside
// <rich-textarea>, answers in <model-response><message-content>, one
// button that is "Send message" or "Stop response".
(function () {
  'use strict';
  const $ = (id) => document.getElementById(id);
  const editor = document.querySelector('rich-textarea .ql-editor');
  const button = $('send');
  const deep = $('deep');
  const upload = $('upload');
  let streaming = false;
  let onSend = () => {};
  let onStop = () => {};

  button.addEventListener('click', () => (streaming ? onStop() : onSend()));
  deep.addEventListener('click', () => {
    deep.setAttribute('aria-pressed', deep.getAttribute('aria-pressed') === 'true' ? 'false' : 'true');
  });
  upload.addEventListener('change', () => {
    $('chips').textContent = Array.from(upload.files).map((f) => f.name).join(', ');
  });

  FakeChat.start({
    convPath: (id) => '/app/' + id,
    convId: (p) => { const m = p.match(/^\/app\/([0-9a-f]+)$/); return m ? m[1] : null; },
    prompt: () => editor.innerText,
    clearPrompt: () => { editor.innerHTML = ''; },
    files: () => Array.from(upload.files).map((f) => f.name),
    clearFiles: () => { upload.value = ''; $('chips').textContent = ''; },
    deepOn: () => deep.getAttribute('aria-pressed') === 'true',
    showComposer: () => { $('composer').hidden = false; },
    showLogin: () => { $('composer').hidden = true; $('signin').hidden = false; },
    showBanner: (text) => { $('banner-label').textContent = text; $('banner').hidden = false; },
    setGenerating: (on) => {
      streaming = on;
      button.setAttribute('aria-label', on ? 'Stop response' : 'Send message');
      button.classList.toggle('stop', on);
      button.textContent = on ? 'Stop' : 'Send';
    },
    addUser: (text) => {
      const q = document.createElement('user-query');
      q.className = 'user';
      const t = document.createElement('div');
      t.className = 'query-text';
      t.textContent = text;
      q.appendChild(t);
      $('thread').appendChild(q);
    },
    addAssistant: () => {
      const r = document.createElement('model-response');
      const c = document.createElement('message-content');
      c.className = 'model-response-text assistant';
      const md = document.createElement('div');
      md.className = 'markdown';
      c.appendChild(md);
      r.appendChild(c);
      $('thread').appendChild(r);
      return { append: (t) => { md.textContent += t; }, finish: () => {} };
    },
    onSend: (fn) => { onSend = fn; },
    onStop: (fn) => { onStop = fn; },
  });
})();
