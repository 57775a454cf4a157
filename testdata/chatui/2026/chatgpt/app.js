// The fake ChatGPT of 2026: the effort pill menu (Instant / Medium / High,
// menuitemradio, closes on a pick), notices in a role=dialog, a toast or
// the text-error line, guest mode, and the old or the new answer markup.
(function () {
  'use strict';
  const $ = (id) => document.getElementById(id);
  const prompt = $('prompt-textarea');
  const send = $('composer-submit-button');
  const stop = $('stop');
  const pill = $('pill');
  const menu = $('effort-menu');
  const upload = $('upload-files');
  let streaming = false;
  let turns = 0;
  let shape = {};

  const syncSend = () => { send.hidden = streaming || prompt.innerText.trim() === ''; };
  prompt.addEventListener('input', syncSend);
  const effort = () => menu.querySelector('[aria-checked=true]').textContent;
  pill.addEventListener('click', () => {
    menu.hidden = !menu.hidden;
    pill.setAttribute('aria-expanded', String(!menu.hidden));
  });
  for (const item of menu.querySelectorAll('[role=menuitemradio]')) {
    item.addEventListener('click', () => {
      for (const o of menu.querySelectorAll('[role=menuitemradio]')) o.setAttribute('aria-checked', 'false');
      item.setAttribute('aria-checked', 'true');
      pill.textContent = item.textContent;
      // Like the site, a pick closes the menu a moment later.
      setTimeout(() => { menu.hidden = true; pill.setAttribute('aria-expanded', 'false'); }, 50);
    });
  }
  document.addEventListener('keydown', (e) => { if (e.key === 'Escape') menu.hidden = true; });
  upload.addEventListener('change', () => {
    $('chips').textContent = Array.from(upload.files).map((f) => f.name).join(', ');
  });
  $('got-it').addEventListener('click', () => { $('dialog').hidden = true; });

  function showNotice(text) {
    switch (shape.notice_container) {
      case 'toast': $('toast').textContent = text; $('toast').hidden = false; break;
      case 'error': $('errline').textContent = text; $('errline').hidden = false; break;
      default: $('dialog-text').textContent = text; $('dialog').hidden = false;
    }
  }

  function turn(role) {
    turns++;
    if (shape.new_markup) {
      // From about 2026-09: turn keys, search-unit keys, markdown style.
      const t = document.createElement('div');
      t.dataset.turnKey = 'turn-' + turns;
      const unit = document.createElement('div');
      const id = 'msg-' + turns;
      unit.dataset.chatgptSelectionMessageId = id;
      if (role === 'assistant') {
        unit.dataset.chatgptSearchUnitKey = id + ':assistant';
        const body = document.createElement('div');
        body.dataset.markdownTextStyle = 'assistant-message';
        body.className = 'assistant';
        unit.appendChild(body);
        t.appendChild(unit);
        $('thread').appendChild(t);
        return body;
      }
      unit.dataset.userMessageBubble = '';
      unit.className = 'user';
      t.appendChild(unit);
      $('thread').appendChild(t);
      return unit;
    }
    // Until about 2026-08 (<section> turns since 2026-07).
    const section = document.createElement('section');
    section.dataset.testid = 'conversation-turn-' + turns;
    section.dataset.turn = role;
    const div = document.createElement('div');
    div.dataset.messageAuthorRole = role;
    div.className = role;
    section.appendChild(div);
    $('thread').appendChild(section);
    return div;
  }

  // pending_url: an interim /c/WEB:<id> address at once, the real one a
  // second later.
  const pushState = history.pushState.bind(history);
  send.addEventListener('click', () => {
    if (!shape.pending_url || /^\/c\/[\w-]+$/.test(location.pathname)) return;
    pushState({}, '', '/c/WEB:' + Math.random().toString(16).slice(2));
    history.pushState = (s, t, u) => { setTimeout(() => pushState(s, t, u), 1000); };
  });

  FakeChat.start({
    onSession: (sess) => {
      shape = sess.shape || {};
      if (shape.guest) $('profile').remove(); // guests have no account menu
      else $('profile').hidden = false;
      $('guest-login').hidden = !shape.guest;
      if (shape.notice_on_load) showNotice(shape.notice_on_load);
    },
    convPath: (id) => '/c/' + id,
    convId: (p) => { const m = p.match(/^\/c\/([\w-]+)$/); return m ? m[1] : null; },
    prompt: () => prompt.innerText,
    clearPrompt: () => { prompt.innerHTML = ''; syncSend(); },
    files: () => Array.from(upload.files).map((f) => f.name),
    clearFiles: () => { upload.value = ''; $('chips').textContent = ''; },
    deepOn: () => effort() === 'High',
    showComposer: () => { $('composer').hidden = false; },
    showLogin: () => {
      $('composer').hidden = true; if ($('profile')) $('profile').remove();
      $('login-button').hidden = false; $('welcome-login').hidden = false;
    },
    showBanner: showNotice,
    setGenerating: (on) => {
      streaming = on; stop.hidden = !on; syncSend();
      if (on && shape.notice) showNotice(shape.notice);
    },
    addUser: (text) => { turn('user').textContent = text; },
    addAssistant: () => {
      const div = turn('assistant');
      const body = document.createElement('div');
      div.appendChild(body);
      const container = div.closest('section') || div.closest('[data-turn-key]');
      return {
        append: (t) => { body.textContent += t; },
        // The turn's action bar shows once the answer is done.
        finish: () => {
          const bar = document.createElement('div');
          bar.className = 'turn-actions';
          bar.innerHTML = '<button data-testid="copy-turn-action-button" aria-label="Copy">Copy</button>' +
            '<button data-testid="good-response-turn-action-button" aria-label="Good response">Good</button>';
          container.appendChild(bar);
        },
        // The error turn: the message in the turn and its Retry button.
        fail: (text, onRetry) => {
          const err = document.createElement('div');
          err.className = 'turn-error';
          err.textContent = text;
          const b = document.createElement('button');
          b.className = 'btn btn-secondary';
          b.textContent = 'Retry';
          b.addEventListener('click', onRetry);
          div.append(err, b);
        },
        remove: () => { container.remove(); },
      };
    },
    onSend: (fn) => send.addEventListener('click', fn),
    onStop: (fn) => stop.addEventListener('click', fn),
  });
})();
