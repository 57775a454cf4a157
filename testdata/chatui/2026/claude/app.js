// The fake Claude of 2026: new chats at /new, conversations at
// /chat/<id>, logged-out users sent to /login, the "Thinking" switch in the
// model menu (stays open; Escape closes it), answers in
// [data-testid=assistant-message] with data-is-streaming, the limit dialog.
(function () {
  'use strict';
  const $ = (id) => document.getElementById(id);
  const prompt = document.querySelector('[data-testid=chat-input]');
  const send = $('send');
  const stop = $('stop');
  const menu = $('model-menu');
  const thinking = $('thinking');
  const upload = $('chat-input-file-upload-onpage');
  let streaming = false;

  const syncSend = () => {
    send.disabled = streaming || prompt.innerText.trim() === '';
    send.hidden = streaming;
  };
  prompt.addEventListener('input', syncSend);
  $('model').addEventListener('click', () => { menu.hidden = !menu.hidden; });
  thinking.addEventListener('click', () => {
    thinking.setAttribute('aria-checked', thinking.getAttribute('aria-checked') === 'true' ? 'false' : 'true');
  });
  document.addEventListener('keydown', (e) => { if (e.key === 'Escape') menu.hidden = true; });
  upload.addEventListener('change', () => {
    $('chips').textContent = Array.from(upload.files).map((f) => f.name).join(', ');
  });

  if (location.pathname === '/login') {
    $('login').hidden = false;
    return; // the login page is all there is
  }
  $('app').hidden = false;

  FakeChat.start({
    onSession: (sess) => {
      const shape = sess.shape || {};
      if (shape.artifact_panel) { $('artifact-text').textContent = shape.artifact_panel; $('artifact').hidden = false; }
    },
    convPath: (id) => '/chat/' + id,
    convId: (p) => { const m = p.match(/^\/chat\/([\w-]+)$/); return m ? m[1] : null; },
    prompt: () => prompt.innerText,
    clearPrompt: () => { prompt.innerHTML = ''; syncSend(); },
    files: () => Array.from(upload.files).map((f) => f.name),
    clearFiles: () => { upload.value = ''; $('chips').textContent = ''; },
    deepOn: () => thinking.getAttribute('aria-checked') === 'true',
    showComposer: () => { $('composer').hidden = false; },
    showLogin: () => { location.replace('/login'); },
    // Like the capture of 2026-09-09: the composer stays, nothing streams.
    showBanner: (text) => { $('limit-text').textContent = text; $('limit').hidden = false; },
    setGenerating: (on) => { streaming = on; stop.hidden = !on; syncSend(); },
    addUser: (text) => {
      const d = document.createElement('div');
      d.dataset.testid = 'user-message';
      d.className = 'user';
      d.textContent = text;
      $('thread').appendChild(d);
    },
    addAssistant: () => {
      const wrap = document.createElement('div');
      wrap.dataset.testRenderCount = '1';
      const msg = document.createElement('div');
      msg.dataset.testid = 'assistant-message';
      msg.dataset.isStreaming = 'true';
      const r = document.createElement('div');
      r.className = 'font-claude-response assistant';
      const md = document.createElement('div');
      md.className = 'standard-markdown';
      r.appendChild(md);
      msg.appendChild(r);
      wrap.appendChild(msg);
      $('thread').appendChild(wrap);
      return {
        append: (t) => { md.textContent += t; },
        finish: () => { msg.dataset.isStreaming = 'false'; },
        // A failed reply keeps its text, stops streaming and says so, with
        // a retry control.
        fail: (text, onRetry) => {
          msg.dataset.isStreaming = 'false';
          const err = document.createElement('div');
          err.className = 'reply-error';
          err.textContent = text;
          const b = document.createElement('button');
          b.type = 'button';
          b.textContent = 'Retry';
          b.addEventListener('click', onRetry);
          err.appendChild(b);
          msg.appendChild(err);
        },
        remove: () => { wrap.remove(); },
      };
    },
    onSend: (fn) => send.addEventListener('click', fn),
    onStop: (fn) => stop.addEventListener('click', fn),
  });
})();
