// fakechat.js: the behaviour every fake chat UI shares. A site script calls
// FakeChat.start(site) with the DOM hooks of its own markup:
//
//   convPath(id)           the URL path of conversation id
//   convId(pathname)       the conversation id in a path, or null
//   prompt()               the text typed into the prompt input
//   clearPrompt()
//   files()                the names of the attached files
//   clearFiles()
//   deepOn()               whether deep mode is on
//   showComposer()         the page is ready for input
//   showLogin()            the login wall
//   showBanner(text)       the rate-limit banner
//   setGenerating(bool)    stop button / streaming marker
//   addUser(text)
//   addAssistant()         -> {append(text), finish(), and on 2026 pages
//                             fail(text, onRetry): the site's error turn
//                             with its Retry control; remove()}
//   onSend(fn), onStop(fn) wire the buttons
//   onSession(sess)        optional: the session (2026 pages read sess.shape)
//
// The server (gateway/browser/fakechat) answers /__fake/api/*.
(function () {
  'use strict';
  const API = '/__fake/api';

  window.FakeChat = {
    start(site) {
      let conv = null;
      let generating = false;
      let timer = null;
      let current = null;
      let hold = 0;

      const post = (path, body) =>
        fetch(API + path, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });

      function finish() {
        clearTimeout(timer);
        generating = false;
        if (current) current.finish();
        current = null;
        site.setGenerating(false);
      }

      // The stream ends without the site's completion signal: the stop
      // button goes, the turn stays as it is.
      function cut() {
        clearTimeout(timer);
        generating = false;
        current = null;
        site.setGenerating(false);
      }

      // The site fails the turn: its error and a Retry control.
      function fail(d) {
        const turn = current;
        cut();
        turn.fail(d.error_text, () => retry(turn));
      }

      async function retry(turn) {
        if (generating) return;
        turn.remove();
        const r = await post('/retry', { conversation_id: conv || '' });
        stream(await r.json());
      }

      function stream(d) {
        generating = true;
        site.setGenerating(true);
        current = site.addAssistant();
        navigator.sendBeacon(API + '/streaming', ''); // tests wait on it
        const tokens = d.answer.match(/\S+\s*/g) || [];
        let i = 0;
        const step = () => {
          if (!generating) return;
          if (d.fail && i >= d.error_after) { fail(d); return; }
          if (d.cut_after > 0 && i >= d.cut_after) { cut(); return; }
          if (d.stall_after > 0 && i >= d.stall_after) {
            timer = setTimeout(step, d.token_ms); // hung: the stop button stays, nothing grows
            return;
          }
          if (i < tokens.length) {
            current.append(tokens[i++]);
            const pause = d.pause_ms > 0 && i === tokens.length - 1;
            timer = setTimeout(step, pause ? d.pause_ms : d.token_ms);
            return;
          }
          if (d.forever) {
            current.append(' more');
            timer = setTimeout(step, d.token_ms);
            return;
          }
          finish();
        };
        timer = setTimeout(step, d.token_ms);
      }

      async function send() {
        const text = site.prompt().trim();
        if (!text || generating) return;
        const files = site.files();
        site.addUser(text);
        site.clearPrompt();
        site.clearFiles();
        const sending = post('/send', { conversation_id: conv || '', prompt: text, deep: site.deepOn(), attachments: files });
        // A page slow to finish the click: busy after the prompt left.
        for (const end = Date.now() + hold; Date.now() < end;) { /* busy */ }
        const r = await sending;
        const d = await r.json();
        if (d.login_wall) { site.showLogin(); return; }
        if (d.banner) { site.showBanner(d.banner); if (!d.answer) return; }
        if (!conv) {
          conv = d.conversation_id;
          history.pushState({}, '', site.convPath(conv));
        }
        if (d.no_start) return;
        if (d.start_ms) setTimeout(() => stream(d), d.start_ms); // a site slow to start
        else stream(d);
      }

      function stop() {
        if (!generating) return;
        finish();
        navigator.sendBeacon(API + '/stop', JSON.stringify({ conversation_id: conv || '' }));
      }

      async function init() {
        site.onSend(send);
        site.onStop(stop);
        const sess = await (await fetch(API + '/session')).json();
        hold = sess.send_hold_ms || 0;
        if (site.onSession) site.onSession(sess);
        if (sess.login_wall) { site.showLogin(); return; }
        if (sess.banner) site.showBanner(sess.banner);
        site.showComposer();
        const id = site.convId(location.pathname);
        if (!id) return;
        // Like the real sites, the earlier turns arrive after the composer.
        await new Promise((ok) => setTimeout(ok, sess.history_delay_ms || 0));
        const r = await fetch(API + '/conversation/' + encodeURIComponent(id));
        if (!r.ok) {
          // Deleted, or another account's: like the real sites, go to a
          // new chat.
          history.replaceState({}, '', site.startPath || '/');
          if (site.showNotFound) site.showNotFound();
          return;
        }
        const c = await r.json();
        conv = c.id;
        for (const m of c.messages) {
          if (m.role === 'user') site.addUser(m.content);
          else {
            const a = site.addAssistant();
            if (m.failed) { a.fail(sess.error_text, () => retry(a)); continue; }
            a.append(m.content);
            if (!m.cut) a.finish();
          }
        }
      }

      init();
    },
  };
})();
