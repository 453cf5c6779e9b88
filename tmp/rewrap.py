import sys, re, textwrap
W=118
def wrap_item(line):
    m=re.match(r'^(\s*(?:[-*]|\d+\.)\s+|\s*)', line)
    lead=m.group(1); ind=' '*len(lead)
    return textwrap.wrap(line[len(lead):], width=W, initial_indent=lead, subsequent_indent=ind, break_long_words=False, break_on_hyphens=False)
def table2list(line):
    cells=[c.strip() for c in line.strip().strip('|').split('|')]
    return '- **'+cells[0]+'**: '+' — '.join(cells[1:]) if len(cells)>1 else line
for path in sys.argv[1:]:
    out=[]; fence=False
    for line in open(path).read().split('\n'):
        if line.startswith('```'): fence=not fence; out.append(line); continue
        if fence or len(line)<=160: out.append(line); continue
        if line.startswith('|'): out.append('@@TABLE '+line); continue
        out.extend(wrap_item(line))
    open(path,'w').write('\n'.join(out))
