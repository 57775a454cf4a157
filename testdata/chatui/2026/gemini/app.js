// The fake Gemini of 2026: the mode picker menu (its label says "Pro
// Extended" when extended thinking is on; a pick closes the menu), the
// two-step upload that creates input[name=Filedata], answers with a
// thoughts panel and a footer marked complete when done, guest mode.
(function () {
  'use strict';
  const $ = (id) => document.getElementById(id);
  const editor = document.querySelector('rich-textarea .ql-editor');
  const button = $('send');
  const modeMenu = $('mode-menu');
  let streaming = false;
  let extended = false;
  let onSend = () => {};
  let onStop = () => {};
  const input = () => document.querySelector('input[name=Filedata]');

  const sync = () => { button.hidden = !streaming && editor.innerText.trim() === ''; };
  editor.addEventListener('input', sync);
  button.addEventListener('click', () => (streaming ? onStop() : onSend()));
  $('mode').addEventListener('click', () => { modeMenu.hidden = !modeMenu.hidden; });
  $('extended').addEventListener('click', () => {
    extended = !extended;
    $('extended').querySelector('gem-menu-item-content').classList.toggle('selected', extended);
    $('mode').setAttribute('aria-label', 'Open mode picker, currently Pro' + (extended ? ' Extended' : ''));
    setTimeout(() => { modeMenu.hidden = true; }, 50);
  });
  $('tools').addEventListener('click', () => { $('tools-menu').hidden = !$('tools-menu').hidden; });
  $('upload-files').addEventListener('click', () => {
    // The file input exists only once the chooser was asked for.
    if (!input()) {
      const i = document.createElement('input');
      i.type = 'file'; i.name = 'Filedata'; i.multiple = true; i.hidden = true;
      i.addEventListener('change', () => {
        $('chips').textContent = Array.from(i.files).map((f) => f.name).join(', ');
      });
      $('composer').appendChild(i);
    }
    $('tools-menu').hidden = true;
  });
  document.addEventListener('keydown', (e) => {
    if (e.key === 'Escape') { modeMenu.hidden = true; $('tools-menu').hidden = true; }
  });

  FakeChat.start({
    onSession: (sess) => {
      const shape = sess.shape || {};
      if (shape.guest) $('account').remove(); // guests have no account link
      else $('account').hidden = false;
      $('guest-signin').hidden = !shape.guest;
    },
    convPath: (id) => '/app/' + id,
    convId: (p) => { const m = p.match(/^\/app\/([0-9a-f]+)$/); return m ? m[1] : null; },
    prompt: () => editor.innerText,
    clearPrompt: () => { editor.innerHTML = ''; sync(); },
    files: () => (input() ? Array.from(input().files).map((f) => f.name) : []),
    clearFiles: () => { if (input()) input().remove(); $('chips').textContent = ''; },
    deepOn: () => extended,
    showComposer: () => { $('composer').hidden = false; },
    showLogin: () => { $('composer').hidden = true; if ($('account')) $('account').remove(); $('signin').hidden = false; },
    showBanner: (text) => { $('snack-label').textContent = text; $('snack').hidden = false; },
    setGenerating: (on) => {
      streaming = on;
      button.setAttribute('aria-label', on ? 'Stop response' : 'Send message');
      button.textContent = on ? 'Stop' : 'Send';
      sync();
    },
    addUser: (text) => {
      const q = document.createElement('user-query');
      q.className = 'user';
      q.textContent = text;
      $('thread').appendChild(q);
    },
    addAssistant: () => {
      const r = document.createElement('model-response');
      const rc = document.createElement('response-container');
      const thoughts = document.createElement('model-thoughts');
      const tc = document.createElement('message-content');
      tc.textContent = 'Thinking about the question';
      thoughts.appendChild(tc);
      const c = document.createElement('message-content');
      c.className = 'model-response-text assistant';
      const md = document.createElement('div');
      md.className = 'markdown';
      c.appendChild(md);
      const footer = document.createElement('div');
      footer.className = 'response-footer';
      rc.append(thoughts, c, footer);
      r.appendChild(rc);
      $('thread').appendChild(r);
      return {
        append: (t) => { md.textContent += t; },
        finish: () => { footer.classList.add('complete'); footer.textContent = 'Copy · Good response · Bad response'; },
        fail: (text, onRetry) => {
          const err = document.createElement('div');
          err.className = 'response-error';
          err.textContent = text;
          const b = document.createElement('button');
          b.setAttribute('aria-label', 'Retry');
          b.textContent = 'Retry';
          b.addEventListener('click', onRetry);
          err.appendChild(b);
          rc.appendChild(err);
        },
        remove: () => { r.remove(); },
      };
    },
    onSend: (fn) => { onSend = fn; },
    onStop: (fn) => { onStop = fn; },
  });
})();
