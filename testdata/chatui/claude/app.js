// The fake Claude: new chats at /new, conversations at /chat/<id>, a
// ProseMirror prompt, answers in div.font-claude-response inside a wrapper
// whose data-is-streaming says whether it is still being written.
(function () {
  'use strict';
  const $ = (id) => document.getElementById(id);
  const prompt = document.querySelector('div.ProseMirror');
  const send = $('send');
  const stop = $('stop');
  const thinking = $('thinking');
  const upload = $('upload');
  let streaming = false;

  const syncSend = () => {
    send.disabled = streaming || prompt.innerText.trim() === '';
    send.hidden = streaming;
  };
  prompt.addEventListener('input', syncSend);
  thinking.addEventListener('click', () => {
    thinking.dataset.state = thinking.dataset.state === 'on' ? 'off' : 'on';
  });
  upload.addEventListener('change', () => {
    $('chips').textContent = Array.from(upload.files).map((f) => f.name).join(', ');
  });

  FakeChat.start({
    convPath: (id) => '/chat/' + id,
    convId: (p) => { const m = p.match(/^\/chat\/([\w-]+)$/); return m ? m[1] : null; },
    prompt: () => prompt.innerText,
    clearPrompt: () => { prompt.innerHTML = ''; syncSend(); },
    files: () => Array.from(upload.files).map((f) => f.name),
    clearFiles: () => { upload.value = ''; $('chips').textContent = ''; },
    deepOn: () => thinking.dataset.state === 'on',
    showComposer: () => { $('composer').hidden = false; },
    showLogin: () => { $('composer').hidden = true; $('login').hidden = false; },
    showBanner: (text) => { $('banner').textContent = text; $('banner').hidden = false; },
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
      wrap.dataset.isStreaming = 'true';
      const r = document.createElement('div');
      r.className = 'font-claude-response assistant';
      wrap.appendChild(r);
      $('thread').appendChild(wrap);
      return {
        append: (t) => { r.textContent += t; },
        finish: () => { wrap.dataset.isStreaming = 'false'; },
      };
    },
    onSend: (fn) => send.addEventListener('click', fn),
    onStop: (fn) => stop.addEventListener('click', fn),
  });
})();
