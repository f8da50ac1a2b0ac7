// One episode (conversation, judge, LLM-call timeline, samples, tokens) and the comparison of two
// episodes of one GRPO group. Uses the helpers app.js puts on window.AJ.
"use strict";

(function () {
  const { h, fmt, api } = AJ;
  const tokenState = { showSpecial: true, low: -2.5, pinned: null };

  function contentText(content) {
    if (content === null || content === undefined) return "";
    if (typeof content === "string") return content;
    if (Array.isArray(content)) return content.map((p) => (p && typeof p === "object" ? p.text ?? JSON.stringify(p) : String(p))).join("");
    return JSON.stringify(content, null, 1);
  }

  function kv(pairs) {
    return h("dl", { class: "kv" }, pairs.flatMap(([k, v, cls]) => [h("dt", { text: k }), h("dd", { class: cls || "", text: fmt(v) })]));
  }

  function summary(ep) {
    const task = ep.task || {};
    return h("div", { class: "summary" },
      kv([["episode", ep.episode_id], ["task", task.task_id], ["group", ep.group_id], ["step", ep.step],
        ["reward", ep.reward, "reward"], ["success", ep.success, ep.success ? "good" : "bad"], ["attempts", ep.attempts],
        ["seconds", ep.seconds], ["tokens generated", (ep.tokens || {}).generated], ["error", ep.error, ep.error ? "bad" : ""]]),
      h("div", { class: "task" }, h("b", { text: "query " }), contentText(task.query)),
      task.answer !== undefined && task.answer !== null ? h("div", { class: "task" }, h("b", { text: "expected " }), h("code", { text: JSON.stringify(task.answer) })) : null);
  }

  function conversation(ep) {
    const messages = ep.messages || [];
    if (!messages.length) return h("p", { class: "muted", text: "no messages recorded" });
    return h("div", { class: "conversation" }, messages.map((m, i) => h("div", { class: `msg role-${m.role}`, "data-msg": i },
      h("div", { class: "role", text: m.role + (m.name ? ` (${m.name})` : "") + (m.tool_call_id ? ` ← ${m.tool_call_id}` : "") }),
      h("pre", { text: contentText(m.content) }),
      (m.tool_calls || []).map((c) => h("div", { class: "toolcall" }, h("b", { text: "call " + ((c.function || {}).name || c.name || "?") }),
        h("code", { text: " " + contentText((c.function || {}).arguments ?? c.arguments) }))))));
  }

  function judge(ep) {
    const parts = Object.entries(ep.reward_parts || {});
    return h("div", {},
      parts.length ? h("table", { class: "grid parts" }, h("tr", {}, h("th", { text: "part" }), h("th", { text: "value" })),
        parts.map(([k, v]) => h("tr", { class: k.includes("penalty") ? (v ? "penalty hit" : "penalty") : "" }, h("td", { text: k }), h("td", { text: fmt(v, 4) }))))
        : h("p", { class: "muted", text: "no reward parts (the workflow set the reward, or the episode was not scored)" }),
      ep.feedback ? h("p", {}, h("b", { text: "feedback " }), ep.feedback) : null,
      ep.judge_error ? h("p", { class: "bad" }, h("b", { text: "judge error " }), ep.judge_error) : null,
      (ep.tool_calls || []).length ? h("details", {}, h("summary", { text: `${ep.tool_calls.length} tool call(s) with results` }),
        h("pre", { text: JSON.stringify(ep.tool_calls, null, 1) })) : null);
  }

  function timeline(ep) {
    const calls = ep.llm_calls || [];
    const samples = ep.samples || [];
    const advantages = (ep._view || {}).samples || [];
    const longest = Math.max(1e-6, ...calls.map((c) => c.seconds || 0));
    const sampleOf = (index) => samples.findIndex((s) => (s.calls || []).includes(index));
    const rows = calls.map((c) => {
      const s = sampleOf(c.index);
      return h("tr", { "data-call": c.index },
        h("td", { text: `#${c.index}` }), h("td", { text: c.agent + (c.trained ? "" : " (not trained)") }),
        h("td", {}, h("div", { class: "bar", style: `width:${Math.max(2, 160 * (c.seconds || 0) / longest)}px` }), ` ${fmt(c.seconds, 2)} s`),
        h("td", { text: (c.prompt_ids || []).length }), h("td", { text: (c.completion_ids || []).length }),
        h("td", { text: c.finish_reason }), h("td", { text: c.spliced_turns }),
        h("td", { class: c.tool_call_parse_failed ? "bad" : "", text: c.tool_call_parse_failed ? (c.parse_error || "failed") : "" }),
        h("td", { text: s >= 0 ? `sample ${s}` : "–" }));
    });
    const sampleRows = samples.map((s, i) => h("tr", { class: s.fork_reason ? "fork" : "" },
      h("td", { text: i }), h("td", { text: s.agent }), h("td", { text: (s.calls || []).join(", ") }),
      h("td", { text: s.tokens }), h("td", { text: s.trained }), h("td", { text: fmt((advantages[i] || {}).advantage, 4) }),
      h("td", { text: s.fork_reason || (i ? "" : "first") })));
    const merge = ep.merge || {};
    return h("div", {},
      h("table", { class: "grid calls" }, h("tr", {}, ["call", "agent", "time", "prompt tok", "completion tok", "finish", "spliced turns", "parse", "merged into"].map((t) => h("th", { text: t }))), rows),
      h("p", { class: "muted", text: `merge: ${merge.llm_calls ?? calls.length} call(s) → ${merge.samples ?? samples.length} sample(s), token ratio ${fmt(merge.merge_token_ratio)}` +
        (merge.forks && Object.keys(merge.forks).length ? ` · forks: ${JSON.stringify(merge.forks)}` : "") }),
      h("table", { class: "grid samples" }, h("tr", {}, ["sample", "agent", "calls", "tokens", "trained tokens", "advantage", "fork reason"].map((t) => h("th", { text: t }))), sampleRows));
  }

  // ------------------------------------------------------------ tokens
  function shownText(text) {
    return text.replace(/\n/g, "↵\n").replace(/\t/g, "→\t");
  }

  function tokenBlock(sample, s, tokenizer) {
    const box = h("div", { class: "tokens", id: `tokens-${s}`, "data-sample": s });
    sample.ids.forEach((id, i) => {
      const lp = sample.logprobs[i];
      const mask = sample.mask[i];
      const cls = ["tok", mask ? "m1" : "m0"];
      if (mask && lp !== null && lp < tokenState.low) cls.push("low");
      if (sample.special[i]) cls.push("special");
      box.append(h("span", { class: cls.join(" "), id: `tok-${s}-${i}`, "data-s": s, "data-i": i, "data-id": id,
        "data-mask": mask, "data-logprob": lp === null ? "" : lp },
      tokenizer ? shownText(sample.text[i]) || "∅" : `[${id}]`));
    });
    return box;
  }

  function showToken(el, data) {
    const sample = data.samples[Number(el.dataset.s)];
    const i = Number(el.dataset.i);
    const lp = sample.logprobs[i];
    const masked = sample.mask[i] === 1;
    const info = document.getElementById("tok-info");
    document.getElementById("tok-info-id").textContent = String(sample.ids[i]);
    document.getElementById("tok-info-text").textContent = sample.text ? JSON.stringify(sample.text[i]) : "(no tokenizer)";
    document.getElementById("tok-info-mask").textContent = masked ? "1 (trained)" : "0 (context)";
    document.getElementById("tok-info-logprob").textContent = masked && lp !== null ? lp.toFixed(4) : "–";
    document.getElementById("tok-info-prob").textContent = masked && lp !== null ? `(p=${Math.exp(lp).toFixed(3)})` : "";
    document.getElementById("tok-info-adv").textContent = masked && sample.advantage !== null && sample.advantage !== undefined ? sample.advantage.toFixed(4) : "–";
    document.getElementById("tok-info-pos").textContent = `${sample.title} · token ${i} of ${sample.ids.length}`;
    const rect = el.getBoundingClientRect();
    info.hidden = false;
    info.style.left = `${Math.min(window.innerWidth - 280, rect.left + window.scrollX)}px`;
    info.style.top = `${rect.bottom + window.scrollY + 6}px`;
  }

  function tokens(data) {
    const controls = h("div", { class: "token-controls" },
      h("label", {}, h("input", { type: "checkbox", id: "toggle-special", checked: tokenState.showSpecial, onchange: (e) => {
        tokenState.showSpecial = e.target.checked;
        box.classList.toggle("hide-special", !tokenState.showSpecial);
      } }), " special tokens"),
      h("label", {}, " highlight logprob below ", h("input", { type: "number", id: "low-logprob", step: "0.5", value: tokenState.low, onchange: (e) => {
        tokenState.low = Number(e.target.value);
        for (const el of box.querySelectorAll(".tok.m1")) el.classList.toggle("low", el.dataset.logprob !== "" && Number(el.dataset.logprob) < tokenState.low);
      } })),
      h("span", { class: "legend" }, h("span", { class: "tok m1" , text: "trained (mask 1)" }), h("span", { class: "tok m0", text: "context (mask 0)" }),
        h("span", { class: "tok m1 low", text: "low logprob" }), h("span", { class: "tok special", text: "special" })));
    const notes = [data.note, data.tokenizer_note].filter(Boolean).map((n) => h("p", { class: "muted", text: n }));
    const box = h("div", { class: "samples-tokens" + (tokenState.showSpecial ? "" : " hide-special") }, data.samples.map((sample, s) => h("div", { class: "sample" },
      h("h4", { text: `${sample.title} · ${sample.agent || ""} · ${sample.ids.length} tokens, ${sample.mask.reduce((a, b) => a + b, 0)} trained` +
        (sample.advantage !== null && sample.advantage !== undefined ? ` · advantage ${sample.advantage.toFixed(4)}` : "") +
        (sample.trained === false ? " · not trained (group without signal)" : "") + (sample.fork_reason ? ` · fork: ${sample.fork_reason}` : "") }),
      tokenBlock(sample, s, data.tokenizer))));
    box.addEventListener("mouseover", (e) => { if (e.target.classList.contains("tok") && !tokenState.pinned) showToken(e.target, data); });
    box.addEventListener("click", (e) => {
      if (!e.target.classList.contains("tok")) return;
      tokenState.pinned = tokenState.pinned === e.target ? null : e.target;  // tap: pin the details (touch screens)
      showToken(e.target, data);
    });
    box.addEventListener("mouseleave", () => { if (!tokenState.pinned) document.getElementById("tok-info").hidden = true; });
    return h("div", {}, controls, notes, box);
  }

  function group(ep) {
    const view = ep._view || {};
    const others = (view.group || []).filter((m) => m.line !== view.line);
    if (!others.length) return h("p", { class: "muted", text: "no other episode of this group in this file" });
    return h("ul", { class: "group" }, others.map((m) => h("li", {},
      h("a", { href: `#/compare?run=${view.run}&file=${view.file}&a=${view.line}&b=${m.line}`, class: "compare-link", text: `compare with line ${m.line}` }),
      ` · repeat ${fmt(m.repeat)} · reward ${fmt(m.reward)} · ${m.success ? "success" : "no success"}`)));
  }

  function corruptPanel(row, params) {
    return h("div", { class: "corrupt-panel", id: "corrupt" }, h("h2", { text: `line ${row.line} is corrupt` }),
      h("p", { text: row.reason || "" }), h("pre", { text: row.text }),
      h("a", { href: `#/episodes?run=${params.run || 0}&file=${params.file || ""}`, text: "back to the episodes" }));
  }

  function section(title, id, body) {
    return h("section", { class: "part", id }, h("h2", { text: title }), body);
  }

  AJ.views.episode = async function episodeView(params) {
    const root = document.getElementById("view-episode");
    if (!params.line) { root.replaceChildren(h("p", { class: "muted", text: "open an episode from the Episodes table" })); return; }
    const run = Number(params.run || 0);
    const ep = await api(`runs/${run}/episodes/${params.line}`, { file: params.file });
    document.getElementById("tok-info").hidden = true;
    tokenState.pinned = null;
    if (ep.corrupt) { root.replaceChildren(corruptPanel(ep, params)); return; }
    const tokenData = await api(`runs/${run}/episodes/${params.line}/tokens`, { file: params.file });
    root.replaceChildren(
      h("h1", { text: `${ep._view.file}.jsonl line ${ep._view.line}` }), summary(ep),
      section("Conversation", "conversation", conversation(ep)),
      section("Judge", "judge", judge(ep)),
      section("LLM calls and samples", "timeline", timeline(ep)),
      section("Tokens", "token-view", tokens(tokenData)),
      section("Its GRPO group", "group", group(ep)));
  };

  // ------------------------------------------------------------ compare
  function column(ep) {
    const advantages = (ep._view.samples || []).map((s) => fmt(s.advantage, 4));
    return h("div", { class: "compare-col", "data-line": ep._view.line },
      h("h2", {}, h("a", { href: `#/episode?run=${ep._view.run}&file=${ep._view.file}&line=${ep._view.line}`, text: `line ${ep._view.line}` }), ` · repeat ${fmt(ep.repeat)}`),
      kv([["reward", ep.reward, "reward"], ["success", ep.success, ep.success ? "good" : "bad"],
        ["advantage(s)", advantages.length ? advantages.join(", ") : null, "advantage"], ["turns", (ep.llm_calls || []).length],
        ["tool calls", (ep.tool_calls || []).length], ["error", ep.error]]),
      judge(ep), conversation(ep));
  }

  AJ.views.compare = async function compareView(params) {
    const root = document.getElementById("view-compare");
    if (!params.a || !params.b) { root.replaceChildren(h("p", { class: "muted", text: "open an episode and pick another of its group to compare" })); return; }
    const body = await api(`runs/${params.run || 0}/compare`, { file: params.file, a: params.a, b: params.b });
    root.replaceChildren(h("h1", { text: `group ${body.a.group_id}` }), h("div", { class: "compare" }, column(body.a), column(body.b)));
  };
})();
