// The notes example (docs/client.md): sign-up and sign-in, each user's own notes, live
// updates from other tabs. The client comes from the server itself: no build step.
const api = new URLSearchParams(location.search).get('api') ?? location.origin;
const { createClient } = await import(`${api}/api/client.js`);
const b = createClient(api);

const $ = (id) => document.getElementById(id);
const notes = new Map();
let sub;

function render() {
  $('notes').replaceChildren(
    ...[...notes.values()]
      .sort((x, y) => Number(x.id) - Number(y.id))
      .map((n) => Object.assign(document.createElement('li'), { textContent: n.body })),
  );
}

async function load() {
  const { rows } = await b.from('notes').select(['id', 'body']).order('id');
  notes.clear();
  for (const n of rows) notes.set(n.id, n);
  render();
}

async function show(user) {
  $('signed-out').hidden = !!user;
  $('signed-in').hidden = !user;
  sub?.close();
  notes.clear();
  render();
  if (!user) return;
  $('who').textContent = user.email;
  await load();
  sub = b.realtime.subscribe(['notes'], (e) => {
    if (e.event === 'reset') return load();
    if (e.event !== 'change') return;
    if (e.action === 'delete') notes.delete(e.row.id);
    else notes.set(e.row.id, e.row);
    render();
  });
}

const report = (e) => ($('status').textContent = e ? `${e.code}: ${e.message}` : '');
const credentials = () => ({ email: $('email').value, password: $('password').value });

$('sign-in').onsubmit = (e) => {
  e.preventDefault();
  b.auth.signIn(credentials()).then(() => report(), report);
};
$('sign-up-button').onclick = () => b.auth.signUp(credentials()).then(() => report(), report);
$('sign-out').onclick = () => b.auth.signOut();
$('add').onsubmit = (e) => {
  e.preventDefault();
  b.from('notes')
    .insert({ body: $('body').value })
    .then(() => {
      $('body').value = '';
      report();
    }, report);
};

b.auth.onChange((event, user) => {
  if (event !== 'refreshed') show(user).catch(report);
});
await b.auth.ready;
if (!b.auth.user) show(null);
