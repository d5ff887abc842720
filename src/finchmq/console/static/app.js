// finchmq console: one page, plain JavaScript. Each view fetches the JSON API (/api/...) and
// builds its DOM with h(); errors from the cluster are shown in the red banner, never dropped.
"use strict";

(() => {
  const main = document.getElementById("main");
  const errorBox = document.getElementById("error");
  const errorText = document.getElementById("error-text");
  let generation = 0; // bumped on every navigation: late answers of a left page are ignored
  let timers = [];
  let charts = [];
  // Who is logged in: {login: false} without a login, else {login, user, role, csrfToken}
  let me = { login: false };
  // Whether this user may change the cluster (the server checks it again on every request)
  const canChange = () => !me.login || me.role === "admin";

  // -- helpers -----------------------------------------------------------------------------------

  function h(tag, attrs, ...children) {
    const el = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
      else if (k === "class") el.className = v;
      else if (v === true) el.setAttribute(k, "");
      else el.setAttribute(k, v);
    }
    for (const child of children.flat(Infinity)) {
      if (child === null || child === undefined || child === false) continue;
      el.append(child instanceof Node ? child : String(child));
    }
    return el;
  }

  function pad(n) { return String(n).padStart(2, "0"); }

  function fmtTime(ms) {
    if (!ms || ms <= 0) return "-";
    const d = new Date(ms);
    return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ` +
      `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
  }

  function fmtNum(n, digits = 0) {
    if (n === null || n === undefined) return "-";
    return Number(n).toLocaleString(undefined, { maximumFractionDigits: digits, minimumFractionDigits: digits });
  }

  // The value of a datetime-local input for epoch ms (local time, to the second).
  function localInput(ms) {
    const d = new Date(ms);
    return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T` +
      `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
  }

  function epochOf(input) {
    return input.value ? new Date(input.value).getTime() : null;
  }

  function link(hash, text) { return h("a", { href: hash }, text); }
  function topicLink(t) { return link(`#/topic/${encodeURIComponent(t)}`, t); }
  function groupLink(g) { return link(`#/group/${encodeURIComponent(g)}`, g); }
  function messageLink(topic, id, text) {
    return link(`#/message?topic=${encodeURIComponent(topic)}&id=${encodeURIComponent(id)}`, text || id);
  }

  function showError(err) {
    errorText.textContent = err && err.message ? err.message : String(err);
    errorBox.hidden = false;
  }
  function clearError() { errorBox.hidden = true; errorText.textContent = ""; }
  document.getElementById("error-close").addEventListener("click", clearError);

  function toLogin() {
    location.href = `/login?next=${encodeURIComponent("/" + location.hash)}`;
  }

  async function api(method, path, body) {
    const init = { method, headers: {} };
    if (body !== undefined) {
      init.headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    if (method !== "GET" && me.csrfToken) init.headers["X-CSRF-Token"] = me.csrfToken;
    const response = await fetch(path, init);
    if (response.status === 401 && me.login) { toLogin(); throw new Error("the session expired: log in again"); }
    let data = null;
    try { data = await response.json(); } catch (e) { /* not JSON: reported below */ }
    if (!response.ok) {
      const code = data && data.codeName ? ` [${data.codeName}]` : "";
      throw new Error((data && data.error ? data.error : `HTTP ${response.status}`) + code);
    }
    return data;
  }

  // Run an action for a button: disable it meanwhile, show a failure in the banner.
  async function act(button, fn) {
    clearError();
    if (button) button.disabled = true;
    try { return await fn(); } catch (e) { showError(e); return undefined; } finally {
      if (button) button.disabled = false;
    }
  }

  function table(columns, rows, empty = "nothing to show") {
    if (!rows || rows.length === 0) return h("div", { class: "empty" }, empty);
    return h("table", {},
      h("thead", {}, h("tr", {}, columns.map(c => h("th", { class: c.num ? "num" : null }, c.title)))),
      h("tbody", {}, rows.map(r => h("tr", {}, columns.map(c =>
        h("td", { class: [c.num ? "num" : "", c.mono ? "mono" : "", c.time ? "time" : ""].join(" ").trim() || null },
          c.value(r)))))));
  }

  function kv(pairs) {
    return h("table", { class: "kv" }, h("tbody", {}, pairs.map(([k, v]) => h("tr", {}, h("th", {}, k), h("td", {}, v)))));
  }

  function card(title, ...children) {
    return h("section", { class: "card" }, title ? h("h2", { style: "margin-top:0" }, title) : null, children);
  }

  const PALETTE = ["#2f6fde", "#e07b00", "#1e8a4c", "#c62f2f", "#7b4fd6", "#00899b", "#b0468a", "#6b7785"];

  // A uPlot line chart of {time: [epoch s], series: {name: [values]}}.
  function chart(container, data, unit) {
    const names = Object.keys(data.series);
    container.dataset.points = String(data.time.length);  // what the chart was given (kept across restarts)
    container.dataset.first = data.time.length ? String(data.time[0]) : "";
    if (data.time.length < 2 || names.length === 0) {
      container.append(h("div", { class: "empty" },
        `collecting samples (one every ${data.interval} s)…`, data.lastError ? ` last error: ${data.lastError}` : ""));
      return;
    }
    const width = Math.max(container.clientWidth || 600, 300);
    const plot = new uPlot({
      width, height: 220,
      series: [{}, ...names.map((name, i) => ({
        label: name, stroke: PALETTE[i % PALETTE.length], width: 1.5, spanGaps: false,
        value: (u, v) => v === null || v === undefined ? "-" : fmtNum(v, unit === "msg/s" ? 1 : 0),
      }))],
      axes: [{}, { label: unit, size: 60 }],
      scales: { y: { range: (u, min, max) => [0, Math.max(max, 1)] } },
    }, [data.time, ...names.map(n => data.series[n])], container);
    charts.push(plot);
  }

  function every(ms, fn) { timers.push(setInterval(fn, ms)); }

  // -- pages -------------------------------------------------------------------------------------

  // 5.x timer backlog: the timers waiting, with mqadmin clusterList's #Timer(Progress) as a tooltip.
  function timerCell(t) {
    if (!t) return "-";
    return h("span", { class: "timer-pending", title: `delivery ${t.readBehind} s behind, ` +
      `${t.offsetBehind} not yet in the wheel, ${fmtNum(t.enqueueTps, 1)}/s in, ${fmtNum(t.dequeueTps, 1)}/s out` },
      fmtNum(t.pending));
  }

  // POP: messages popped and not acked, with the revive service's check points as a tooltip.
  function popCell(p) {
    if (!p) return "-";
    return h("span", { class: "pop-inflight", title: `${p.revivePendingCheckPoints} check points to revive, ` +
      `${p.reviveBehindMessages} revive messages unread (${p.reviveBehindMillis} ms behind), ` +
      `${p.bufferedCheckPoints} check points buffered` }, fmtNum(p.inflight));
  }

  async function clusterPage(gen) {
    const [cluster, series] = await Promise.all([api("GET", "/api/cluster"), api("GET", "/api/series/brokers")]);
    if (gen !== generation) return;
    document.getElementById("namesrv").textContent = `name server ${cluster.nameServers.join(";")}`;
    const chartBox = h("div", { class: "chart", id: "tps-chart" });
    main.replaceChildren(
      h("h1", {}, "Cluster"),
      card("Brokers", table([
        { title: "Cluster", value: b => b.cluster },
        { title: "Broker", value: b => b.brokerName },
        { title: "ID", value: b => b.brokerId, num: true },
        { title: "Address", value: b => b.addr, mono: true },
        { title: "Version", value: b => b.version || (b.error ? h("span", { class: "muted" }, b.error) : "-") },
        { title: "In TPS", value: b => fmtNum(b.inTps, 1), num: true },
        { title: "Out TPS", value: b => fmtNum(b.outTps, 1), num: true },
        { title: "Messages in", value: b => fmtNum(b.inTotal), num: true },
        { title: "Messages out", value: b => fmtNum(b.outTotal), num: true },
        { title: "Timers (pending)", value: b => timerCell(b.timer), num: true },
        { title: "Pop inflight", value: b => popCell(b.pop), num: true },
        { title: "Up", value: b => (b.runtime || "-").replace(/[[\]]/g, "") },
      ], cluster.brokers, "no broker is registered with the name server")),
      card(`Messages per second, last hour (the console samples every ${series.interval} s)`, chartBox),
    );
    chart(chartBox, series, "msg/s");
    every(series.interval * 1000, () => { if (gen === generation) render({ clear: false }); });
  }

  async function topicsPage(gen) {
    const [topics, cluster] = await Promise.all([api("GET", "/api/topics"), api("GET", "/api/cluster")]);
    if (gen !== generation) return;
    const clusters = [...new Set(cluster.brokers.map(b => b.cluster))];
    const filter = h("input", { type: "search", placeholder: "filter", id: "topic-filter" });
    const kinds = { RETRY: h("input", { type: "checkbox" }), DLQ: h("input", { type: "checkbox" }),
      SYSTEM: h("input", { type: "checkbox" }) };
    const list = h("div", { id: "topic-list" });
    const draw = () => {
      const text = filter.value.trim().toLowerCase();
      const shown = topics.filter(t => (t.kind === "NORMAL" || kinds[t.kind].checked) &&
        t.topic.toLowerCase().includes(text));
      list.replaceChildren(table([
        { title: "Topic", value: t => topicLink(t.topic) },
        { title: "Kind", value: t => h("span", { class: `badge ${t.kind}` }, t.kind) },
        { title: "", value: t => h("span", { class: "actions" },
          link(`#/topic/${encodeURIComponent(t.topic)}`, "route & status"),
          link(`#/messages?topic=${encodeURIComponent(t.topic)}`, "messages")) },
      ], shown, "no topic matches"));
    };
    filter.addEventListener("input", draw);
    Object.values(kinds).forEach(k => k.addEventListener("change", draw));
    main.replaceChildren(
      h("h1", {}, "Topics"),
      canChange() ? topicForm({ clusters, create: true }) : null,
      card(null,
        h("div", { class: "toolbar" }, h("label", { class: "grow" }, "Filter", filter),
          ...Object.entries(kinds).map(([k, box]) => h("label", { class: "check" }, box, `${k.toLowerCase()} topics`))),
        list),
    );
    draw();
  }

  // The create (or update) topic form.
  function topicForm({ clusters, create, topic, queue }) {
    const name = h("input", { id: "topic-name", value: topic || "", placeholder: "TopicName", disabled: !create });
    const clusterSel = h("select", { id: "topic-cluster" }, clusters.map(c => h("option", { value: c }, c)));
    const read = h("input", { id: "topic-read", type: "number", min: 1, max: 1024, value: queue ? queue.readQueueNums : 8 });
    const write = h("input", { id: "topic-write", type: "number", min: 1, max: 1024, value: queue ? queue.writeQueueNums : 8 });
    const perm = h("select", { id: "topic-perm" },
      [["6", "read & write"], ["4", "read only"], ["2", "write only"]].map(([v, t]) =>
        h("option", { value: v, selected: queue ? String(queue.perm) === v : v === "6" }, t)));
    const order = h("input", { type: "checkbox", id: "topic-order" });
    const result = h("div");
    const button = h("button", { type: "submit", id: "topic-submit" }, create ? "Create topic" : "Update topic");
    const form = h("form", {
      onsubmit: async (e) => {
        e.preventDefault();
        const answer = await act(button, () => api("POST", "/api/topics", {
          topic: name.value, cluster: clusterSel.value, readQueueNums: Number(read.value),
          writeQueueNums: Number(write.value), perm: Number(perm.value), order: order.checked,
        }));
        if (answer) {
          result.replaceChildren(h("div", { class: "result" },
            `${create ? "Created" : "Updated"} `, topicLink(answer.topic), ` on ${answer.brokers.join(", ")}`));
          if (!create) render();
        }
      },
    }, h("div", { class: "toolbar" },
      h("label", {}, "Topic", name), h("label", {}, "Cluster", clusterSel), h("label", {}, "Read queues", read),
      h("label", {}, "Write queues", write), h("label", {}, "Permission", perm),
      h("label", { class: "check" }, order, "ordered"), button), result);
    return card(create ? "Create a topic" : "Update", form);
  }

  function sendForm(topic) {
    const tags = h("input", { id: "send-tags", placeholder: "TagA" });
    const keys = h("input", { id: "send-keys", placeholder: "key1 key2" });
    const body = h("textarea", { id: "send-body", placeholder: "message body" });
    const trace = h("input", { type: "checkbox", id: "send-trace" });
    const result = h("div", { id: "send-result" });
    const button = h("button", { type: "submit", id: "send-submit" }, "Send");
    return card("Send a test message", h("form", {
      onsubmit: async (e) => {
        e.preventDefault();
        const r = await act(button, () => api("POST", "/api/messages",
          { topic, tags: tags.value, keys: keys.value, body: body.value, trace: trace.checked }));
        if (r) {
          result.replaceChildren(h("div", { class: "result" }, `${r.sendStatus}: `,
            messageLink(topic, r.offsetMsgId, r.msgId), ` on ${r.brokerName} queue ${r.queueId} offset ${r.queueOffset}`));
        }
      },
    }, h("div", { class: "toolbar" }, h("label", {}, "Tags", tags), h("label", {}, "Keys", keys),
      h("label", { class: "grow" }, "Body", body), h("label", { class: "check" }, trace, "trace"), button), result));
  }

  async function topicPage(gen, topic) {
    const [info, cluster] = await Promise.all([
      api("GET", `/api/topics/${encodeURIComponent(topic)}`), api("GET", "/api/cluster")]);
    if (gen !== generation) return;
    const clusters = [...new Set(cluster.brokers.map(b => b.cluster))];
    const del = h("button", { class: "danger", id: "topic-delete", onclick: async () => {
      if (!confirm(`Delete topic ${topic} from every broker and name server?`)) return;
      const r = await act(del, () => api("DELETE", `/api/topics/${encodeURIComponent(topic)}`, {}));
      if (r) location.hash = "#/topics";
    } }, "Delete topic");
    const status = info.status;
    const total = status.reduce((s, q) => s + (q.maxOffset - q.minOffset), 0);
    main.replaceChildren(
      h("div", { class: "titlebar" }, h("h1", { class: "grow" }, `Topic ${topic}`),
        link(`#/messages?topic=${encodeURIComponent(topic)}`, "messages"), canChange() ? del : null),
      h("div", { class: "grid2" },
        card("Route", table([
          { title: "Broker", value: q => q.brokerName },
          { title: "Read queues", value: q => q.readQueueNums, num: true },
          { title: "Write queues", value: q => q.writeQueueNums, num: true },
          { title: "Perm", value: q => q.permName },
        ], info.route.queueDatas), h("div", { style: "height:8px" }), table([
          { title: "Cluster", value: b => b.cluster },
          { title: "Broker", value: b => b.brokerName },
          { title: "ID", value: b => b.brokerId, num: true },
          { title: "Address", value: b => b.addr, mono: true },
        ], info.route.brokerDatas)),
        card("Consumer groups", table([{ title: "Group", value: g => groupLink(g) }],
          info.consumerGroups, "no group consumes this topic"))),
      card(`Status: ${fmtNum(total)} messages stored`, table([
        { title: "Broker", value: q => q.brokerName },
        { title: "Queue", value: q => q.queueId, num: true },
        { title: "Min offset", value: q => q.minOffset, num: true },
        { title: "Max offset", value: q => q.maxOffset, num: true },
        { title: "Last updated", value: q => fmtTime(q.lastUpdateTimestamp), time: true },
      ], status)),
      canChange() ? topicForm({ clusters, create: false, topic, queue: info.route.queueDatas[0] }) : null,
      canChange() ? sendForm(topic) : null,
    );
  }

  async function clusterNames() {
    const cluster = await api("GET", "/api/cluster");
    return [...new Set(cluster.brokers.map(b => b.cluster))];
  }

  // The consumer group settings the form edits (SubscriptionGroupConfig, Java names).
  const GROUP_FLAGS = [["consumeEnable", "consume enabled"], ["consumeBroadcastEnable", "broadcast allowed"],
    ["consumeFromMinEnable", "consume from min"], ["consumeMessageOrderly", "orderly (5.x)"]];
  const GROUP_NUMBERS = [["retryQueueNums", "Retry queues", 1], ["retryMaxTimes", "Retry max times", 16],
    ["brokerId", "Broker ID", 0], ["whichBrokerWhenConsumeSlowly", "Broker when slow", 1]];

  // The create (or update) consumer group form, on every master of the chosen cluster.
  function groupForm({ clusters, create, group, config, onDone }) {
    const name = h("input", { id: "group-name", value: group || "", placeholder: "GroupName", disabled: !create });
    const clusterSel = h("select", { id: "group-cluster" }, clusters.map(c => h("option", { value: c }, c)));
    const flags = Object.fromEntries(GROUP_FLAGS.map(([k]) => [k, h("input", { type: "checkbox", id: `group-${k}`,
      checked: config ? Boolean(config[k]) : k !== "consumeMessageOrderly" })]));
    const numbers = Object.fromEntries(GROUP_NUMBERS.map(([k, , v]) => [k, h("input", { type: "number", id: `group-${k}`,
      value: config && config[k] !== undefined && config[k] !== null ? config[k] : v })]));
    const result = h("div", { id: "group-result" });
    const button = h("button", { type: "submit", id: "group-submit" }, create ? "Create group" : "Update group");
    const form = h("form", {
      onsubmit: async (e) => {
        e.preventDefault();
        const body = { group: name.value.trim(), cluster: clusterSel.value };
        GROUP_FLAGS.forEach(([k]) => { body[k] = flags[k].checked; });
        GROUP_NUMBERS.forEach(([k]) => { body[k] = numbers[k].value === "" ? null : Number(numbers[k].value); });
        const r = await act(button, () => api("POST", "/api/groups", body));
        if (r) {
          result.replaceChildren(h("div", { class: "result" },
            `${r.created ? "Created" : "Updated"} `, groupLink(r.group), ` on ${r.brokers.join(", ")}`));
          if (onDone) await onDone();
        }
      },
    }, h("div", { class: "toolbar" }, h("label", {}, "Group", name), h("label", {}, "Cluster", clusterSel),
      GROUP_NUMBERS.map(([k, title]) => h("label", {}, title, numbers[k])),
      GROUP_FLAGS.map(([k, title]) => h("label", { class: "check" }, flags[k], title)), button), result);
    return card(create ? "Create a consumer group" : "Update the settings", form);
  }

  async function groupsPage(gen) {
    const groups = await api("GET", "/api/groups");
    if (gen !== generation) return;
    const filter = h("input", { type: "search", placeholder: "filter" });
    const system = h("input", { type: "checkbox" });
    const list = h("div", { id: "group-list" });
    const draw = () => {
      const text = filter.value.trim().toLowerCase();
      list.replaceChildren(table([
        { title: "Group", value: g => groupLink(g.group) },
        { title: "Online clients", value: g => g.clients, num: true },
        { title: "Consume type", value: g => g.consumeType || "-" },
        { title: "Model", value: g => g.messageModel || "-" },
        { title: "Consume TPS", value: g => fmtNum(g.consumeTps, 1), num: true },
        { title: "Lag", value: g => fmtNum(g.diffTotal), num: true },
        { title: "", value: g => g.error ? h("span", { class: "muted" }, g.error) : "" },
      ], groups.filter(g => (system.checked || !g.system) && g.group.toLowerCase().includes(text)),
      "no consumer group yet"));
    };
    filter.addEventListener("input", draw);
    system.addEventListener("change", draw);
    main.replaceChildren(h("h1", {}, "Consumer groups"),
      canChange() ? groupForm({ clusters: await clusterNames(), create: true }) : null, card(null,
      h("div", { class: "toolbar" }, h("label", { class: "grow" }, "Filter", filter),
        h("label", { class: "check" }, system, "system groups")), list));
    draw();
  }

  async function groupPage(gen, group) {
    const [info, series] = await Promise.all([
      api("GET", `/api/groups/${encodeURIComponent(group)}`),
      api("GET", `/api/series/groups/${encodeURIComponent(group)}`)]);
    if (gen !== generation) return;
    const conn = info.connection;
    const progress = info.progress;
    const topics = new Set();
    if (progress) progress.queues.forEach(q => { if (!q.topic.startsWith("%RETRY%")) topics.add(q.topic); });
    if (conn) Object.keys(conn.subscriptionTable || {}).forEach(t => { if (!t.startsWith("%RETRY%")) topics.add(t); });
    const clusters = canChange() ? await clusterNames() : [];
    if (gen !== generation) return;
    const del = h("button", { class: "danger", id: "group-delete", onclick: async () => {
      if (!confirm(`Delete consumer group ${group}, with its retry and dead-letter topics, from cluster ${clusters[0]}?`)) return;
      const r = await act(del, () => api("DELETE", `/api/groups/${encodeURIComponent(group)}`, { cluster: clusters[0] }));
      if (r) location.hash = "#/groups";
    } }, "Delete group");
    const chartBox = h("div", { class: "chart", id: "lag-chart" });
    const lagBox = h("div", { id: "lag" });
    const drawProgress = (data) => {
      const p = data.progress;
      lagBox.replaceChildren(
        h("h2", { style: "margin-top:0" }, p ? ["Lag: ", h("span", { id: "lag-total" }, fmtNum(p.diffTotal)),
          ` messages, consume TPS ${fmtNum(p.consumeTps, 1)}`] : "Lag"),
        p ? table([
          { title: "Topic", value: q => topicLink(q.topic) },
          { title: "Broker", value: q => q.brokerName },
          { title: "Queue", value: q => q.queueId, num: true },
          { title: "Broker offset", value: q => q.brokerOffset, num: true },
          { title: "Consumer offset", value: q => q.consumerOffset, num: true },
          { title: "Lag", value: q => q.diff, num: true },
          { title: "Last consumed", value: q => fmtTime(q.lastTimestamp), time: true },
        ], p.queues, "no queue consumed yet") : h("div", { class: "empty", id: "progress-error" }, data.progressError));
    };
    drawProgress(info);
    main.replaceChildren(
      h("div", { class: "titlebar" }, h("h1", { class: "grow" }, `Consumer group ${group}`),
        link(`#/dlq?group=${encodeURIComponent(group)}`, "dead letters"), canChange() && info.config ? del : null),
      h("div", { class: "grid2" },
        card("Online clients", conn ? [table([
          { title: "Client ID", value: c => c.clientId, mono: true },
          { title: "Address", value: c => c.clientAddr, mono: true },
          { title: "Language", value: c => c.language },
          { title: "Version", value: c => c.versionDesc || c.version },
        ], conn.connectionSet, "no client online"), h("div", { class: "muted", style: "margin-top:8px" },
          `consume type ${conn.consumeType || "-"}, model ${conn.messageModel || "-"}, ` +
          `from ${conn.consumeFromWhere || "-"}`)] : h("div", { class: "empty", id: "connection-error" }, info.connectionError)),
        card("Subscriptions", conn ? table([
          { title: "Topic", value: s => topicLink(s.topic) },
          { title: "Expression", value: s => s.subString, mono: true },
        ], Object.entries(conn.subscriptionTable || {}).map(([t, s]) => ({ topic: t, subString: s.subString })))
          : h("div", { class: "empty" }, "no client online"))),
      card(null, lagBox, h("h2", {}, `Lag, last hour (sampled every ${series.interval} s)`), chartBox),
      popCard(info),
      canChange() && info.config ? groupForm({ clusters, create: false, group, config: info.config }) : null,
      canChange() ? resetForm(group, [...topics].sort(), async () => {
        const fresh = await act(null, () => api("GET", `/api/groups/${encodeURIComponent(group)}`));
        if (fresh && gen === generation) drawProgress(fresh);
      }) : null,
    );
    const drawLag = (data) => {
      charts.forEach(c => c.destroy());
      charts = [];
      chartBox.replaceChildren();
      chart(chartBox, { ...data, series: { lag: data.series.lag } }, "messages");
    };
    drawLag(series);
    every(series.interval * 1000, async () => {  // the chart only: the forms keep what is typed
      try {
        const data = await api("GET", `/api/series/groups/${encodeURIComponent(group)}`);
        if (gen === generation) drawLag(data);
      } catch (e) { showError(e); }
    });
  }

  // How the group's push consumers read each topic (5.x setConsumeMode: PULL unless set) and,
  // for those told to pop, each client's popped queues (5.x consumerStatus's pop detail).
  function popCard(info) {
    const modes = info.requestModes;
    const popping = (modes || []).some(m => m.mode === "POP");
    const errors = Object.entries(info.popErrors || {});
    return card("Consume mode (PULL or POP)", h("div", { id: "request-modes" },
      modes === null ? h("div", { class: "empty" }, info.requestModesError) : table([
        { title: "Topic", value: m => topicLink(m.topic) },
        { title: "Mode", value: m => m.mode },
        { title: "Pop share queues", value: m => m.popShareQueueNum, num: true },
      ], modes, "no mode set: push consumers pull every topic")),
    popping ? [h("h2", {}, "Popped queues"), h("div", { id: "pop-detail" }, table([
      { title: "Client ID", value: q => q.clientId, mono: true },
      { title: "Topic", value: q => topicLink(q.topic) },
      { title: "Broker", value: q => q.brokerName },
      { title: "Queue", value: q => q.queueId === -1 ? "all" : q.queueId, num: true },
      { title: "Waiting for ack", value: q => q.waitAckCount, num: true },
      { title: "Dropped", value: q => q.droped ? "yes" : "no" },
      { title: "Last pop", value: q => fmtTime(q.lastPopTimestamp), time: true },
    ], info.pop, "no client online pops")),
    errors.map(([c, e]) => h("div", { class: "muted" }, `${c}: ${e}`))] : null);
  }

  function resetForm(group, topics, onDone) {
    const topic = h("input", { id: "reset-topic", list: "reset-topics", value: topics[0] || "" });
    const options = h("datalist", { id: "reset-topics" }, topics.map(t => h("option", { value: t })));
    const when = h("input", { id: "reset-time", type: "datetime-local", step: 1, value: localInput(Date.now() - 3600_000) });
    const force = h("input", { type: "checkbox", id: "reset-force", checked: true });
    const result = h("div", { id: "reset-result" });
    const button = h("button", { type: "submit", id: "reset-submit" }, "Reset offset");
    return card("Reset offset by time", h("form", {
      onsubmit: async (e) => {
        e.preventDefault();
        const timestamp = epochOf(when);
        if (timestamp === null) { showError("choose the time to reset to"); return; }
        const r = await act(button, () => api("POST", `/api/groups/${encodeURIComponent(group)}/reset-offset`,
          { topic: topic.value, timestamp, force: force.checked }));
        if (r) {
          result.replaceChildren(h("div", { class: "result" },
            `Reset ${group} on ${r.topic} to ${fmtTime(r.timestamp)}: `,
            r.offsets.map(o => `${o.brokerName}/${o.queueId} → ${o.offset}`).join(", ") || "no queue"));
          await onDone();
        }
      },
    }, h("div", { class: "toolbar" }, h("label", {}, "Topic", topic, options), h("label", {}, "Time", when),
      h("label", { class: "check" }, force, "force (also move forward)"), button), result));
  }

  function messageTable(topic, messages, extra = []) {
    return table([
      { title: "Message ID", value: m => messageLink(m.topic || topic, m.offsetMsgId, m.msgId), mono: true },
      { title: "Tags", value: m => m.tags || "" },
      { title: "Keys", value: m => m.keys || "" },
      { title: "Queue", value: m => m.queueId, num: true },
      { title: "Offset", value: m => m.queueOffset, num: true },
      { title: "Stored", value: m => fmtTime(m.storeTimestamp), time: true },
      ...extra,
    ], messages, "no message found");
  }

  async function messagesPage(gen, query) {
    const topics = await api("GET", "/api/topics");
    if (gen !== generation) return;
    const mode = query.get("by") || "time";
    const topic = h("input", { id: "msg-topic", list: "msg-topics", value: query.get("topic") || "" });
    const options = h("datalist", { id: "msg-topics" }, topics.map(t => h("option", { value: t.topic })));
    const begin = h("input", { id: "msg-begin", type: "datetime-local", step: 1,
      value: localInput(Number(query.get("begin")) || Date.now() - 3600_000) });
    const end = h("input", { id: "msg-end", type: "datetime-local", step: 1,
      value: query.get("end") ? localInput(Number(query.get("end"))) : "" });
    const key = h("input", { id: "msg-key", value: query.get("key") || "" });
    const id = h("input", { id: "msg-id", value: query.get("id") || "", size: 40 });
    const results = h("div", { id: "msg-results" });
    const button = h("button", { type: "submit", id: "msg-search" }, "Search");
    const tab = (m, text) => h("button", { type: "button", class: m === mode ? "" : "secondary", id: `msg-by-${m}`,
      onclick: () => { location.hash = `#/messages?by=${m}&topic=${encodeURIComponent(topic.value)}`; } }, text);
    const fields = {
      time: [h("label", {}, "Begin", begin), h("label", {}, "End (empty: now)", end)],
      key: [h("label", {}, "Key", key)],
      id: [h("label", {}, "Message ID (offset or client id)", id)],
    }[mode];
    const search = async () => {
      if (mode === "id") {
        location.hash = `#/message?topic=${encodeURIComponent(topic.value)}&id=${encodeURIComponent(id.value.trim())}`;
        return;
      }
      const params = new URLSearchParams({ topic: topic.value.trim() });
      if (mode === "key") params.set("key", key.value.trim());
      else {
        params.set("begin", String(epochOf(begin) ?? Date.now() - 3600_000));
        if (epochOf(end) !== null) params.set("end", String(epochOf(end)));
      }
      const r = await act(button, () => api("GET", `/api/messages?${params}`));
      if (r) {
        results.replaceChildren(h("div", { class: "muted", style: "margin-bottom:6px" },
          `${r.messages.length} message(s)${r.truncated ? " (more exist: narrow the range)" : ""}`),
        messageTable(topic.value.trim(), r.messages));
      }
    };
    main.replaceChildren(h("h1", {}, "Messages"),
      card(null, h("div", { class: "toolbar" }, tab("time", "By topic and time"), tab("key", "By key"),
        tab("id", "By message ID")),
      h("form", { onsubmit: (e) => { e.preventDefault(); search(); } },
        h("div", { class: "toolbar" }, h("label", {}, "Topic", topic, options), ...fields, button))),
      card(null, results));
    if (query.get("topic") && (mode === "time" || query.get("key"))) search();
  }

  async function messagePage(gen, query) {
    const topic = query.get("topic") || "";
    const id = query.get("id") || "";
    const params = topic ? `?topic=${encodeURIComponent(topic)}` : "";
    const r = await api("GET", `/api/messages/${encodeURIComponent(id)}${params}`);
    if (gen !== generation) return;
    const m = r.message;
    const body = typeof m.body === "string" ? m.body : `base64: ${m.body.base64}`;
    main.replaceChildren(
      h("h1", {}, `Message ${m.msgId}`),
      h("div", { class: "grid2" },
        card("Message", kv([
          ["Topic", topicLink(m.topic)], ["Message ID", h("span", { class: "mono" }, m.msgId)],
          ["Offset message ID", h("span", { class: "mono" }, m.offsetMsgId)],
          ["Tags", m.tags || "-"], ["Keys", m.keys || "-"],
          ["Queue", `${m.queueId} at offset ${m.queueOffset}`], ["Commit log offset", m.commitLogOffset],
          ["Reconsume times", m.reconsumeTimes], ["Born", `${fmtTime(m.bornTimestamp)} from ${m.bornHost}`],
          ["Stored", `${fmtTime(m.storeTimestamp)} on ${m.storeHost}`], ["Size", `${m.storeSize} bytes`],
        ])),
        card("Properties", table([
          { title: "Name", value: p => p[0], mono: true }, { title: "Value", value: p => p[1], mono: true },
        ], Object.entries(m.properties).sort()))),
      card("Body", h("pre", { class: "body", id: "msg-body" }, body)),
      card("Trace", r.traceError ? h("div", { class: "empty" }, `no trace: ${r.traceError}`) : table([
        { title: "Type", value: t => t.type },
        { title: "Group", value: t => t.group },
        { title: "Client host", value: t => t.clientHost, mono: true },
        { title: "Time", value: t => fmtTime(t.timeStamp), time: true },
        { title: "Cost", value: t => `${t.costTime} ms`, num: true },
        { title: "Status", value: t => t.status },
      ], r.trace, "no trace record (send with trace on, and the broker's traceTopicEnable)")),
      card("Consumer groups", r.tracksError ? h("div", { class: "empty" }, r.tracksError) : table([
        { title: "Group", value: t => groupLink(t.consumerGroup) },
        { title: "Track", value: t => t.trackType },
        { title: "Detail", value: t => t.exceptionDesc || "" },
      ], r.tracks, "no group consumes this topic")),
    );
  }

  // rocketmq-dashboard's producer page: a producer group's online members, as a broker of the topic sees them.
  async function producersPage(gen, query) {
    const [topics, groups] = await Promise.all([api("GET", "/api/topics"), api("GET", "/api/producer-groups")]);
    if (gen !== generation) return;
    const topic = h("input", { id: "producer-topic", list: "producer-topics", value: query.get("topic") || "" });
    const topicOptions = h("datalist", { id: "producer-topics" },
      topics.filter(t => t.kind === "NORMAL").map(t => h("option", { value: t.topic })));
    const group = h("input", { id: "producer-group", list: "producer-groups", value: query.get("group") || "" });
    const groupOptions = h("datalist", { id: "producer-groups" }, groups.map(g => h("option", { value: g })));
    const results = h("div", { id: "producer-results" });
    const button = h("button", { type: "submit", id: "producer-search" }, "Search");
    const search = async () => {
      const params = new URLSearchParams({ topic: topic.value.trim(), group: group.value.trim() });
      const r = await act(button, () => api("GET", `/api/producers?${params}`));
      if (r) {
        results.replaceChildren(r.error ? h("div", { class: "empty", id: "producer-none" }, r.error) : table([
          { title: "Client ID", value: c => c.clientId, mono: true },
          { title: "Address", value: c => c.clientAddr, mono: true },
          { title: "Language", value: c => c.language },
          { title: "Version", value: c => c.versionDesc || c.version },
        ], r.connections, "no producer online"));
      }
    };
    main.replaceChildren(h("h1", {}, "Producers"),
      card(null, h("div", { class: "muted", style: "margin-bottom:8px" },
        "The producers of a group online now, as a broker of the topic sees them."),
      h("form", { onsubmit: (e) => { e.preventDefault(); search(); } },
        h("div", { class: "toolbar" }, h("label", {}, "Topic", topic, topicOptions),
          h("label", {}, "Producer group", group, groupOptions), button))),
      card(null, results));
    if (query.get("topic") && query.get("group")) await search();
  }

  // ACL: each master's ACL 1.0 files and ACL 2.0 users and rules; forms to change them (admins).
  async function aclPage(gen) {
    const [state, clusters] = await Promise.all([api("GET", "/api/acl"), clusterNames()]);
    if (gen !== generation) return;
    const clusterSel = h("select", { id: "acl-cluster" }, clusters.map(c => h("option", { value: c }, c)));
    const done = (box, text) => { box.replaceChildren(h("div", { class: "result" }, text)); };
    const send = async (button, box, method, path, body, text) => {
      const r = await act(button, () => api(method, path, { ...body, cluster: clusterSel.value }));
      if (r) { done(box, text(r)); await refresh(); }
    };
    const lists = h("div", { id: "acl-state" });
    const drawState = (data) => lists.replaceChildren(...data.brokers.map(b => card(`${b.brokerName} (${b.brokerAddr})`,
      h("h2", { style: "margin-top:0" }, "ACL 1.0 (plain_acl.yml)"),
      b.acl1.enabled ? [table([
        { title: "File", value: f => f.path, mono: true },
        { title: "Version", value: f => f.counter, num: true },
        { title: "Changed", value: f => fmtTime(f.timestamp), time: true },
      ], b.acl1.files), h("div", { class: "muted" },
        "Accounts are not listed: RocketMQ 4.9.8 removed the request that read them back, as it sent secret keys.")]
        : h("div", { class: "empty acl1-off" }, b.acl1.error),
      h("h2", {}, "ACL 2.0 users"),
      b.acl2.enabled ? table([
        { title: "User", value: u => u.username },
        { title: "Password", value: u => u.password || "-", mono: true },
        { title: "Type", value: u => u.userType || "-" },
        { title: "Status", value: u => u.userStatus || "-" },
        ...(canChange() ? [{ title: "", value: u => deleteButton("user-delete", () =>
          api("DELETE", `/api/acl/users/${encodeURIComponent(u.username)}`, { brokerAddr: b.brokerAddr })) }] : []),
      ], b.acl2.users, "no user") : h("div", { class: "empty acl2-off" }, b.acl2.error),
      b.acl2.enabled ? [h("h2", {}, "ACL 2.0 rules"), table([
        { title: "Subject", value: r => r.subject },
        { title: "Resource", value: r => r.resource, mono: true },
        { title: "Actions", value: r => r.actions.join(", ") },
        { title: "Source IPs", value: r => r.sourceIps.join(", ") || "any" },
        { title: "Decision", value: r => r.decision },
        ...(canChange() ? [{ title: "", value: r => deleteButton("rule-delete", () =>
          api("DELETE", "/api/acl/rules", { subject: r.subject, resource: r.resource, brokerAddr: b.brokerAddr })) }] : []),
      ], b.acl2.rules, "no rule")] : null)));
    const refresh = async () => {
      const fresh = await act(null, () => api("GET", "/api/acl"));
      if (fresh && gen === generation) drawState(fresh);
    };
    const deleteButton = (cls, call) => {
      const b = h("button", { type: "button", class: `small danger ${cls}`, onclick: async () => {
        if (!confirm("Delete it?")) return;
        if (await act(b, call)) await refresh();
      } }, "Delete");
      return b;
    };
    drawState(state);
    const field = (id, title, attrs = {}) => {
      const input = h("input", { id, ...attrs });
      return [input, h("label", {}, title, input)];
    };
    const forms = [];
    if (canChange()) {
      const [ak, akL] = field("acl1-accessKey", "Access key");
      const [sk, skL] = field("acl1-secretKey", "Secret key (empty: keep)", { type: "password", autocomplete: "new-password" });
      const [white, whiteL] = field("acl1-white", "White remote address", { placeholder: "192.168.0.*" });
      const admin = h("input", { type: "checkbox", id: "acl1-admin" });
      const permSel = (id) => h("select", { id }, ["", "DENY", "PUB", "SUB", "PUB|SUB"].map(p =>
        h("option", { value: p }, p || "(keep)")));
      const topicPerm = permSel("acl1-defaultTopicPerm");
      const groupPerm = permSel("acl1-defaultGroupPerm");
      const [tp, tpL] = field("acl1-topicPerms", "Topic perms", { placeholder: "topicA=PUB,topicB=SUB" });
      const [gp, gpL] = field("acl1-groupPerms", "Group perms", { placeholder: "groupA=SUB" });
      const box1 = h("div", { id: "acl1-result" });
      const save1 = h("button", { type: "submit", id: "acl1-submit" }, "Save account");
      const del1 = h("button", { type: "button", class: "danger", id: "acl1-delete", onclick: () => {
        if (confirm(`Delete account ${ak.value}?`)) send(del1, box1, "DELETE",
          `/api/acl/accounts/${encodeURIComponent(ak.value.trim())}`, {}, r => `Deleted ${r.accessKey} on ${r.brokers.join(", ")}`);
      } }, "Delete account");
      forms.push(card("ACL 1.0 account", h("form", { onsubmit: (e) => {
        e.preventDefault();
        send(save1, box1, "POST", "/api/acl/accounts", {
          accessKey: ak.value.trim(), secretKey: sk.value || null, whiteRemoteAddress: white.value.trim() || null,
          admin: admin.checked, defaultTopicPerm: topicPerm.value || null, defaultGroupPerm: groupPerm.value || null,
          topicPerms: tp.value, groupPerms: gp.value,
        }, r => `Saved ${r.accessKey}${r.secretKey ? ` (secret ${r.secretKey})` : ""} on ${r.brokers.join(", ")}`);
      } }, h("div", { class: "toolbar" }, akL, skL, whiteL, h("label", {}, "Default topic perm", topicPerm),
        h("label", {}, "Default group perm", groupPerm), tpL, gpL, h("label", { class: "check" }, admin, "admin"),
        save1, del1), box1)));

      const [user, userL] = field("user-name", "User");
      const [pw, pwL] = field("user-password", "Password", { type: "password", autocomplete: "new-password" });
      const userType = h("select", { id: "user-type" }, ["Normal", "Super"].map(t => h("option", { value: t }, t)));
      const userStatus = h("select", { id: "user-status" }, ["enable", "disable"].map(t => h("option", { value: t }, t)));
      const update = h("input", { type: "checkbox", id: "user-update" });
      const box2 = h("div", { id: "user-result" });
      const save2 = h("button", { type: "submit", id: "user-submit" }, "Save user");
      forms.push(card("ACL 2.0 user", h("form", { onsubmit: (e) => {
        e.preventDefault();
        const name = user.value.trim();
        const body = { username: name, password: pw.value || null, userType: userType.value };
        if (update.checked) body.userStatus = userStatus.value;
        send(save2, box2, "POST", update.checked ? `/api/acl/users/${encodeURIComponent(name)}` : "/api/acl/users", body,
          r => `${r.created ? "Created" : "Updated"} ${r.username}${r.password ? ` (password ${r.password})` : ""} on ${r.brokers.join(", ")}`);
      } }, h("div", { class: "toolbar" }, userL, pwL, h("label", {}, "Type", userType), h("label", {}, "Status", userStatus),
        h("label", { class: "check" }, update, "update an existing user"), save2), box2)));

      const [subject, subjectL] = field("rule-subject", "Subject", { placeholder: "User:alice" });
      const [res, resL] = field("rule-resources", "Resources", { placeholder: "Topic:orders*,Group:*" });
      const [actions, actionsL] = field("rule-actions", "Actions", { placeholder: "Pub,Sub" });
      const [ips, ipsL] = field("rule-ips", "Source IPs", { placeholder: "10.0.0.0/8" });
      const decision = h("select", { id: "rule-decision" }, ["Allow", "Deny"].map(t => h("option", { value: t }, t)));
      const box3 = h("div", { id: "rule-result" });
      const save3 = h("button", { type: "submit", id: "rule-submit" }, "Save rule");
      forms.push(card("ACL 2.0 rule", h("form", { onsubmit: (e) => {
        e.preventDefault();
        send(save3, box3, "POST", "/api/acl/rules", { subject: subject.value.trim(), resources: res.value,
          actions: actions.value, sourceIps: ips.value, decision: decision.value },
          r => `Saved ${r.subject} on ${r.resources.join(", ")} on ${r.brokers.join(", ")}`);
      } }, h("div", { class: "toolbar" }, subjectL, resL, actionsL, ipsL, h("label", {}, "Decision", decision), save3), box3)));
    }
    main.replaceChildren(h("h1", {}, "ACL"),
      canChange() ? card(null, h("div", { class: "toolbar" }, h("label", {}, "Changes go to every master of cluster", clusterSel))) : null,
      lists, ...forms);
  }

  async function dlqPage(gen, query) {
    const groups = await api("GET", "/api/groups");
    if (gen !== generation) return;
    const group = h("input", { id: "dlq-group", list: "dlq-groups", value: query.get("group") || "" });
    const options = h("datalist", { id: "dlq-groups" }, groups.filter(g => !g.system).map(g => h("option", { value: g.group })));
    const begin = h("input", { id: "dlq-begin", type: "datetime-local", step: 1, value: localInput(Date.now() - 3600_000) });
    const end = h("input", { id: "dlq-end", type: "datetime-local", step: 1 });
    const results = h("div", { id: "dlq-results" });
    const button = h("button", { type: "submit", id: "dlq-search" }, "Search");
    const resend = (g, m) => {
      const out = h("span", { class: "resend-result" });
      const b = h("button", { type: "button", class: "small secondary", onclick: async () => {
        const r = await act(b, () => api("POST", `/api/groups/${encodeURIComponent(g)}/dlq/resend`, { msgId: m.offsetMsgId }));
        if (r) out.replaceChildren(h("span", { class: r.consumeResult === "CR_SUCCESS" ? "ok" : "failed" },
          ` ${r.consumeResult || "no result"} by ${r.clientId}${r.remark ? ` (${r.remark})` : ""}`));
      } }, "Resend");
      return h("span", { class: "actions" }, b, out);
    };
    const search = async () => {
      const g = group.value.trim();
      const params = new URLSearchParams({ begin: String(epochOf(begin) ?? Date.now() - 3600_000) });
      if (epochOf(end) !== null) params.set("end", String(epochOf(end)));
      const r = await act(button, () => api("GET", `/api/groups/${encodeURIComponent(g)}/dlq?${params}`));
      if (r) {
        results.replaceChildren(h("div", { class: "muted", style: "margin-bottom:6px" },
          `${r.messages.length} dead letter(s) in ${r.topic}${r.truncated ? " (more exist: narrow the range)" : ""}`),
        messageTable(r.topic, r.messages, [
          { title: "Original topic", value: m => m.properties.RETRY_TOPIC || "-" },
          { title: "Reconsumed", value: m => m.reconsumeTimes, num: true },
          ...(canChange() ? [{ title: "", value: m => resend(g, m) }] : []),
        ]));
      }
    };
    main.replaceChildren(h("h1", {}, "Dead letters"),
      card(null, h("div", { class: "muted", style: "margin-bottom:8px" },
        "Messages a group gave up on (%DLQ%group). Resend hands one to an online consumer of the group, " +
        "whose listener consumes it again now."),
      h("form", { onsubmit: (e) => { e.preventDefault(); search(); } },
        h("div", { class: "toolbar" }, h("label", {}, "Consumer group", group, options),
          h("label", {}, "Begin", begin), h("label", {}, "End (empty: now)", end), button))),
      card(null, results));
    if (query.get("group")) search();
  }

  // -- routing -----------------------------------------------------------------------------------

  const PAGES = {
    cluster: (gen) => clusterPage(gen),
    topics: (gen) => topicsPage(gen),
    topic: (gen, arg) => topicPage(gen, arg),
    groups: (gen) => groupsPage(gen),
    group: (gen, arg) => groupPage(gen, arg),
    messages: (gen, arg, query) => messagesPage(gen, query),
    message: (gen, arg, query) => messagePage(gen, query),
    dlq: (gen, arg, query) => dlqPage(gen, query),
    producers: (gen, arg, query) => producersPage(gen, query),
    acl: (gen) => aclPage(gen),
  };
  const NAV = { topic: "topics", group: "groups", message: "messages" };

  async function render({ clear = true } = {}) {
    const gen = ++generation;
    timers.forEach(clearInterval);
    timers = [];
    charts.forEach(c => c.destroy());
    charts = [];
    if (clear) clearError();
    const hash = location.hash.replace(/^#\/?/, "") || "cluster";
    const [path, search] = hash.split("?");
    const [page, ...rest] = path.split("/");
    const arg = rest.length ? decodeURIComponent(rest.join("/")) : null;
    const query = new URLSearchParams(search || "");
    const view = PAGES[page] || PAGES.cluster;
    document.querySelectorAll("nav a").forEach(a =>
      a.classList.toggle("active", a.dataset.page === (NAV[page] || page)));
    document.body.dataset.page = page;
    document.body.dataset.loaded = "";
    try {
      await view(gen, arg, query);
    } catch (e) {
      if (gen !== generation) return;
      main.replaceChildren(h("h1", {}, page), h("div", { class: "empty" }, "could not load this page"));
      showError(e);
    }
    if (gen === generation) document.body.dataset.loaded = String(gen);
  }

  // The logged-in user, the role and the logout button in the header (nothing without a login).
  async function start() {
    try { me = await api("GET", "/api/session"); } catch (e) { showError(e); }
    if (me.login) {
      document.body.dataset.role = me.role;
      const logout = h("button", { type: "button", id: "logout", class: "small secondary", onclick: async () => {
        const r = await act(logout, () => api("POST", "/logout"));
        if (r) location.href = "/login";
      } }, "Log out");
      document.querySelector("header").append(h("span", { id: "user", class: "user" }, me.user,
        me.role === "admin" ? null : h("span", { class: "badge", id: "read-only" }, "read-only")), logout);
    }
    window.addEventListener("hashchange", () => render());
    render();
  }
  start();
})();
