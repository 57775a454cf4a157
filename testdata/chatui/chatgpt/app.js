// The fake ChatGPT: conversations at /c/<id>, a ProseMirror-like prompt,
// messages marked data-message-author-role, a send button that appears
// with text and turns into a stop button while streaming.
(function () {
  'use strict';
  const $ = (id) => document.getElementById(id);
  const prompt = $('prompt-textarea');
  const send = $('send');
  const stop = $('stop');
  const think = $('think');
  const upload = $('upload');
  let streaming = false;
  let turns = 0;

  const syncSend = () => { send.hidden = streaming || prompt.innerText.trim() === ''; };
  prompt.addEventListener('input', syncSend);
  think.addEventListener('click', () => {
    think.setAttribute('aria-pressed', think.getAttribute('aria-pressed') === 'true' ? 'false' : 'true');
  });
  upload.addEventListener('change', () => {
    $('chips').innerHTML = '';
    for (const f of upload.files) {
      const s = document.createElement('span');
      s.textContent = f.name;
      $('chips').appendChild(s);
    }
  });

  function turn(role) {
    const article = document.createElement('article');
    article.dataset.testid = 'conversation-turn-' + (++turns);
    const div = document.createElement('div');
    div.dataset.messageAuthorRole = role;
    div.className = role;
    article.appendChild(div);
    $('thread').appendChild(article);
    return div;
  }

  FakeChat.start({
    convPath: (id) => '/c/' + id,
    convId: (p) => { const m = p.match(/^\/c\/([\w-]+)$/); return m ? m[1] : null; },
    prompt: () => prompt.innerText,
    clearPrompt: () => { prompt.innerHTML = ''; syncSend(); },
    files: () => Array.from(upload.files).map((f) => f.name),
    clearFiles: () => { upload.value = ''; $('chips').innerHTML = ''; },
    deepOn: () => think.getAttribute('aria-pressed') === 'true',
    showComposer: () => { $('composer').hidden = false; },
    showLogin: () => { $('composer').hidden = true; $('auth').hidden = false; $('login-button').hidden = false; },
    showBanner: (text) => { $('banner').textContent = text; $('banner').hidden = false; },
    setGenerating: (on) => { streaming = on; stop.hidden = !on; syncSend(); },
    addUser: (text) => { turn('user').textContent = text; },
    addAssistant: () => {
      const div = turn('assistant');
      const md = document.createElement('div');
      md.className = 'markdown prose';
      div.appendChild(md);
      return { append: (t) => { md.textContent += t; }, finish: () => {} };
    },
    onSend: (fn) => send.addEventListener('click', fn),
    onStop: (fn) => stop.addEventListener('click', fn),
  });
})();
