/** The part of mailparser 3.7.4 the SMTP sink uses (the package ships no types). */
declare module 'mailparser' {
  interface AddressObject {
    value: { address?: string; name?: string }[];
    text: string;
  }
  interface ParsedMail {
    subject?: string;
    text?: string;
    html?: string | false;
    messageId?: string;
    from?: AddressObject;
    to?: AddressObject | AddressObject[];
    headers: Map<string, unknown>;
  }
  export function simpleParser(source: Buffer | string): Promise<ParsedMail>;
}
