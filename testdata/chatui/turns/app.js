// The fake "Turns" site: a chat UI no built-in profile knows. Answers are
// div.turn.bot > .prose; when an answer is done a .turn-actions toolbar
// (copy, retry) appears under it, stamped with data-done-at (ms since the
// epoch, for the completion-latency benchmark). A missing conversation
// shows "Conversation not found" and a new chat.
(function () {
  'use strict';
  const q = (sel) => document.querySelector(sel);
  const editor = q('.editor');
  const think = q('[data-action=think]');
  const send = q('[data-action=send]');
  const stop = q('[data-action=stop]');
  const upload = q('#upload');
  think.addEventListener('click', () => {
    think.setAttribute('aria-pressed', think.getAttribute('aria-pressed') === 'true' ? 'false' : 'true');
  });

  function turn(cls) {
    const div = document.createElement('div');
    div.className = 'turn ' + cls;
    q('#thread').appendChild(div);
    return div;
  }

  FakeChat.start({
    startPath: '/',
    convPath: (id) => '/c/' + id,
    convId: (p) => { const m = p.match(/^\/c\/([\w-]+)$/); return m ? m[1] : null; },
    prompt: () => editor.innerText,
    clearPrompt: () => { editor.innerHTML = ''; },
    files: () => Array.from(upload.files).map((f) => f.name),
    clearFiles: () => { upload.value = ''; },
    deepOn: () => think.getAttribute('aria-pressed') === 'true',
    showComposer: () => { q('#composer').hidden = false; },
    showLogin: () => { q('#composer').hidden = true; q('#wall').hidden = false; },
    showBanner: (text) => { q('#toast').textContent = text; q('#toast').hidden = false; },
    showNotFound: () => { q('#not-found').hidden = false; },
    setGenerating: (on) => { stop.hidden = !on; send.hidden = on; },
    addUser: (text) => { turn('me').textContent = text; },
    addAssistant: () => {
      const div = turn('bot');
      const prose = document.createElement('div');
      prose.className = 'prose';
      div.appendChild(prose);
      return {
        append: (t) => { prose.textContent += t; },
        finish: () => {
          const bar = document.createElement('div');
          bar.className = 'turn-actions';
          bar.dataset.doneAt = String(Date.now());
          bar.innerHTML = '<button type="button" data-action="copy">Copy</button><button type="button" data-action="retry">Retry</button>';
          // The copy button gives the answer's markdown source: here the
          // answer as shown, in a quote block.
          bar.querySelector('[data-action=copy]').addEventListener('click', () => {
            navigator.clipboard.writeText('> ' + prose.textContent.trim());
          });
          div.appendChild(bar);
        },
      };
    },
    onSend: (fn) => send.addEventListener('click', fn),
    onStop: (fn) => stop.addEventListener('click', fn),
  });
})();
